-- Dispatch batches and redialled contacts (PostgreSQL).
-- Every dispatch belongs to a batch (`bat_…`): a new one, or one an earlier dispatch of
-- the account answered. Inbound and browser calls have none (NULL). A legacy attempt is
-- one batch: its calls carry the attempt's batch_sid.
ALTER TABLE communications ADD COLUMN batch_sid TEXT;
CREATE INDEX communications_batch ON communications(account_sid, batch_sid, created_at) WHERE batch_sid IS NOT NULL;
ALTER TABLE legacy_attempts ADD COLUMN batch_sid TEXT;

-- A contact may be dialled again by a later attempt (`redial`): each of its calls is its
-- dial number `dial` (1, 2, …), unique per contact, so two attempts racing to redial the
-- same contact cannot both take it.
DROP INDEX legacy_attempt_calls_contact;
ALTER TABLE legacy_attempt_calls ADD COLUMN dial BIGINT NOT NULL DEFAULT 1;
CREATE UNIQUE INDEX legacy_attempt_calls_contact ON legacy_attempt_calls(contact_sid, dial);
