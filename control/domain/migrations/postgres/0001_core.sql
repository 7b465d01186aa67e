-- Core administration schema (PostgreSQL). Every table hangs off tenants/accounts with
-- ON DELETE CASCADE so a hard tenant purge removes the whole subtree, including the
-- tables later migrations (0100+ resources, 0200+ adapters) add the same way.
-- Timestamps are TIMESTAMPTZ; booleans are BOOLEAN; string lists are JSON text (portable with SQLite).
CREATE TABLE tenants (
    sid TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    deleted_at TIMESTAMPTZ
);

CREATE TABLE accounts (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    email TEXT NOT NULL,
    external_id TEXT NOT NULL,
    country TEXT NOT NULL,
    region TEXT NOT NULL,
    timezone TEXT NOT NULL,
    phone TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    deleted_at TIMESTAMPTZ
);
CREATE INDEX accounts_tenant ON accounts(tenant_sid, created_at);

CREATE TABLE users (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    email TEXT NOT NULL,
    name TEXT NOT NULL,
    roles TEXT NOT NULL,
    status TEXT NOT NULL,
    password_hash TEXT,
    last_login_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    deleted_at TIMESTAMPTZ
);
CREATE INDEX users_account ON users(account_sid, created_at);
CREATE UNIQUE INDEX users_email_live ON users(email) WHERE deleted_at IS NULL;

CREATE TABLE superuser_tokens (
    sid TEXT PRIMARY KEY,
    label TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    created_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);

CREATE TABLE api_keys (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT REFERENCES accounts(sid) ON DELETE CASCADE,
    label TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE,
    expires_at TIMESTAMPTZ,
    revoked_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX api_keys_tenant ON api_keys(tenant_sid, created_at);
CREATE INDEX api_keys_account ON api_keys(account_sid, created_at);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_sid TEXT NOT NULL REFERENCES users(sid) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    revoked_at TIMESTAMPTZ
);
CREATE INDEX sessions_user ON sessions(user_sid);

CREATE TABLE user_tokens (
    token_hash TEXT PRIMARY KEY,
    user_sid TEXT NOT NULL REFERENCES users(sid) ON DELETE CASCADE,
    purpose TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    used_at TIMESTAMPTZ
);
CREATE INDEX user_tokens_user ON user_tokens(user_sid, purpose);

CREATE TABLE trunks (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    deleted_at TIMESTAMPTZ
);
CREATE INDEX trunks_tenant ON trunks(tenant_sid, created_at);
CREATE UNIQUE INDEX trunks_name_live ON trunks(tenant_sid, name) WHERE deleted_at IS NULL;

CREATE TABLE feature_flag_rules (
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    account_sids TEXT NOT NULL,
    countries TEXT NOT NULL,
    regions TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    invert BOOLEAN NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_sid, name)
);
