-- PostgreSQL announces due communications with a trigger (see the postgres migration of
-- this number) to the dialers of every engine; on SQLite the dialer polls. Nothing to do.
SELECT 1;
