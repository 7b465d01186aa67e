-- Legacy campaign flow (SQLite; timestamps are RFC 3339 text): contacts of a campaign and
-- attempts (launches) that dial them.
-- A campaign is an agent (0320), so both hang off agents(sid) and go with their agent.
-- An attempt's calls are ordinary communications created as POST /v1/communication/-/dispatch
-- creates them; legacy_attempt_calls links each to its attempt and to the contact it
-- dialled. A contact is dialled by at most one attempt (unique contact_sid), so a launch
-- takes exactly the contacts no earlier attempt took. contact_sid has no foreign key: a
-- call keeps its contact's id after the contact is deleted.
CREATE TABLE legacy_contacts (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    campaign_sid TEXT NOT NULL REFERENCES agents(sid) ON DELETE CASCADE,
    phone TEXT NOT NULL,
    variables TEXT NOT NULL,
    creation_time TEXT NOT NULL
);
CREATE INDEX legacy_contacts_campaign ON legacy_contacts(campaign_sid, creation_time, sid);

CREATE TABLE legacy_attempts (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    campaign_sid TEXT NOT NULL REFERENCES agents(sid) ON DELETE CASCADE,
    scheduled_at TEXT NOT NULL,
    delayed BOOLEAN NOT NULL,
    canceled_at TEXT,
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE INDEX legacy_attempts_campaign ON legacy_attempts(campaign_sid, creation_time, sid);

CREATE TABLE legacy_attempt_calls (
    communication_sid TEXT PRIMARY KEY REFERENCES communications(sid) ON DELETE CASCADE,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    attempt_sid TEXT NOT NULL REFERENCES legacy_attempts(sid) ON DELETE CASCADE,
    contact_sid TEXT NOT NULL
);
CREATE UNIQUE INDEX legacy_attempt_calls_contact ON legacy_attempt_calls(contact_sid);
CREATE INDEX legacy_attempt_calls_attempt ON legacy_attempt_calls(attempt_sid, communication_sid);
