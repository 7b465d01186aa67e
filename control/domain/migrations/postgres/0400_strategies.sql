-- Communication strategies (postgres): an account's named retry rules, calling hours in the
-- recipient's time and per-recipient frequency cap (control/domain/src/strategy). The
-- definition is stored as the JSON text the API accepted (checked by Strategy::parse).
-- An agent may name a default strategy; a dispatch without strategy_sid takes it.
CREATE TABLE strategies (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    definition TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX strategies_account ON strategies(account_sid, created_at);
CREATE UNIQUE INDEX strategies_name ON strategies(account_sid, name);

ALTER TABLE agents ADD COLUMN strategy_sid TEXT;
