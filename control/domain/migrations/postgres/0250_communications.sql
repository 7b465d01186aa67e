-- Communications (calls) and their result deliveries (PostgreSQL).
-- A communication is created by POST /v1/communication/-/dispatch (outbound) or by an
-- inbound call; the dialer claims due rows with a claim token and a lease
-- (claimed_until) so two engines on one database never dial the same row.
CREATE TABLE communications (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    agent_sid TEXT,
    scenario_sid TEXT NOT NULL,
    version BIGINT,
    draft_version BIGINT,
    recipient TEXT NOT NULL,
    from_number TEXT NOT NULL,
    trunk TEXT,
    direction TEXT NOT NULL,
    communication_status TEXT NOT NULL,
    call_status TEXT,
    sip_code BIGINT,
    duration BIGINT NOT NULL,
    goals TEXT NOT NULL,
    variables TEXT NOT NULL,
    is_test BOOLEAN NOT NULL,
    consent_granted BOOLEAN NOT NULL,
    has_recording BOOLEAN NOT NULL,
    has_history BOOLEAN NOT NULL,
    history_path TEXT,
    recording_path TEXT,
    data TEXT NOT NULL,
    strategy_sid TEXT,
    timezone TEXT NOT NULL,
    end_reason TEXT,
    error TEXT,
    call_id TEXT,
    scheduled_at TIMESTAMPTZ,
    due_at TIMESTAMPTZ NOT NULL,
    claim_token TEXT,
    claimed_by TEXT,
    claimed_until TIMESTAMPTZ,
    started_at TIMESTAMPTZ,
    answered_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    CHECK ((version IS NULL) <> (draft_version IS NULL))
);
CREATE INDEX communications_account ON communications(account_sid, created_at);
CREATE INDEX communications_due ON communications(communication_status, due_at);
CREATE INDEX communications_agent ON communications(agent_sid, communication_status);
CREATE INDEX communications_claim ON communications(communication_status, claimed_until);

CREATE TABLE result_deliveries (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    communication_sid TEXT NOT NULL REFERENCES communications(sid) ON DELETE CASCADE,
    agent_sid TEXT NOT NULL,
    url TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL,
    last_status_code BIGINT,
    last_error TEXT,
    next_attempt_at TIMESTAMPTZ NOT NULL,
    claim_token TEXT,
    claimed_until TIMESTAMPTZ,
    delivered_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX result_deliveries_target ON result_deliveries(communication_sid, url);
CREATE INDEX result_deliveries_account ON result_deliveries(account_sid, created_at);
CREATE INDEX result_deliveries_due ON result_deliveries(status, next_attempt_at);
