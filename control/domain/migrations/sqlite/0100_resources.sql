-- Telephony resources of an account (SQLite): number pools, numbers, SMS providers,
-- scenarios with their version records, agents. Every row hangs off its account with
-- ON DELETE CASCADE (and the tenant) so the tenant hard purge covers these tables.
-- References between these resources (agent -> number/pool/scenario/provider,
-- number -> pool) are checked by the application: deleting a referenced resource is a
-- 409 listing the agents, never a silent cascade.
CREATE TABLE number_pools (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX number_pools_account ON number_pools(account_sid, created_at);
CREATE UNIQUE INDEX number_pools_name ON number_pools(account_sid, name);

CREATE TABLE numbers (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    identifier TEXT NOT NULL,
    name TEXT NOT NULL,
    pool_sid TEXT,
    trunk TEXT,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX numbers_account ON numbers(account_sid, created_at);
CREATE INDEX numbers_pool ON numbers(pool_sid);
CREATE UNIQUE INDEX numbers_identifier ON numbers(account_sid, identifier);

CREATE TABLE sms_providers (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    url TEXT NOT NULL,
    method TEXT NOT NULL,
    headers TEXT NOT NULL,
    body_template TEXT NOT NULL,
    alphas TEXT NOT NULL,
    numbers TEXT NOT NULL,
    status TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX sms_providers_account ON sms_providers(account_sid, created_at);
CREATE UNIQUE INDEX sms_providers_name ON sms_providers(account_sid, name);

CREATE TABLE scenarios (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX scenarios_account ON scenarios(account_sid, created_at);

-- Exactly one of version (published) and draft_version (draft; 0 = the mutable
-- work-in-progress draft, >= 1 frozen) is set.
CREATE TABLE scenario_versions (
    sid TEXT PRIMARY KEY,
    scenario_sid TEXT NOT NULL REFERENCES scenarios(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    version BIGINT,
    draft_version BIGINT,
    content_hash TEXT NOT NULL,
    snapshot TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    CHECK ((version IS NULL) <> (draft_version IS NULL))
);
CREATE UNIQUE INDEX scenario_versions_published ON scenario_versions(scenario_sid, version) WHERE version IS NOT NULL;
CREATE UNIQUE INDEX scenario_versions_draft ON scenario_versions(scenario_sid, draft_version) WHERE draft_version IS NOT NULL;
CREATE UNIQUE INDEX scenario_versions_frozen_hash ON scenario_versions(scenario_sid, content_hash) WHERE draft_version >= 1;

CREATE TABLE agents (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    gateway_type TEXT NOT NULL,
    number_sid TEXT,
    number_pool_sid TEXT,
    scenario_sid TEXT NOT NULL,
    voicemail_enabled BOOLEAN NOT NULL,
    call_recording BOOLEAN NOT NULL,
    calling_schedule TEXT NOT NULL,
    timezone TEXT NOT NULL,
    cps BIGINT NOT NULL,
    cpl BIGINT NOT NULL,
    is_test BOOLEAN NOT NULL,
    communication_result TEXT NOT NULL,
    sms TEXT,
    sms_provider_sid TEXT,
    status TEXT NOT NULL,
    archive_time TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX agents_account ON agents(account_sid, created_at);
CREATE INDEX agents_number ON agents(number_sid);
CREATE INDEX agents_pool ON agents(number_pool_sid);
CREATE INDEX agents_scenario ON agents(scenario_sid);
CREATE INDEX agents_sms_provider ON agents(sms_provider_sid);
