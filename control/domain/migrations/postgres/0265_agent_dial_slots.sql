-- The dialer's start-rate state per agent, shared by every engine on this database.
-- next_start_us: the earliest start slot not yet used (microseconds since the Unix epoch);
-- a claim locks the row, so cps (start slots) and cpl (live calls counted in the same
-- transaction) hold across engines. See Store::communication_claim_agent. Rows go with
-- their agent (and so with a tenant hard delete).
CREATE TABLE agent_dial_slots (
    agent_sid TEXT PRIMARY KEY REFERENCES agents(sid) ON DELETE CASCADE,
    next_start_us BIGINT NOT NULL
);
