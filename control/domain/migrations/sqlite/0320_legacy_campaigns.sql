-- Legacy campaign family: a legacy campaign is the legacy view of an agent (same sid, same
-- row); the one thing the v1 agent has no field for, the campaign description, lives here.
-- Deleting the agent (v1 or legacy route, tenant purge) deletes its description.
CREATE TABLE legacy_campaigns (
    agent_sid TEXT PRIMARY KEY REFERENCES agents(sid) ON DELETE CASCADE,
    description TEXT NOT NULL
);
