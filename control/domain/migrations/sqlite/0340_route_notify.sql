-- PostgreSQL announces route changes with triggers (see the postgres migration of this
-- number); SQLite's commit hooks see them in the process (store::read_cache). Nothing to do.
SELECT 1;
