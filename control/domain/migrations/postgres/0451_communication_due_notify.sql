-- A communication stored waiting and due (`new`/`queued`, `due_at` within a second, for
-- clocks a little apart) is announced on the channel `callsmith_communications_due` when
-- it commits, so every engine's dialer looks for due rows at once instead of at its next poll
-- (engine::dialer; the poll stays as the fallback). One notification per statement that
-- inserts such rows; PostgreSQL folds equal ones of one transaction into one.
CREATE OR REPLACE FUNCTION callsmith_communications_due() RETURNS trigger AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM inserted WHERE communication_status IN ('new', 'queued') AND due_at <= now() + interval '1 second') THEN
        PERFORM pg_notify('callsmith_communications_due', '');
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER communications_due AFTER INSERT ON communications
    REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION callsmith_communications_due();
