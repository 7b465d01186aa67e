-- Legacy campaign family: account tokens (HTTP Basic account_sid:account_token) and profiles.
CREATE TABLE legacy_credentials (
    account_sid TEXT PRIMARY KEY REFERENCES accounts(sid) ON DELETE CASCADE,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    token_hash TEXT NOT NULL,
    created_at TEXT NOT NULL
);

CREATE TABLE legacy_profiles (
    id TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    email TEXT NOT NULL,
    timezone TEXT NOT NULL,
    creation_time TEXT NOT NULL,
    update_time TEXT NOT NULL
);
CREATE INDEX legacy_profiles_account ON legacy_profiles(account_sid);
