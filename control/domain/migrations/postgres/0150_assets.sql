-- Audio files and STT dictionaries (PostgreSQL). Timestamps TIMESTAMPTZ; string lists JSON text.
CREATE TABLE audio_files (
    sid TEXT PRIMARY KEY,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    object_path TEXT NOT NULL,
    provider TEXT NOT NULL,
    url TEXT NOT NULL,
    content_type TEXT NOT NULL,
    original_filename TEXT NOT NULL,
    size_bytes BIGINT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX audio_files_account ON audio_files(account_sid, created_at);

-- account_sid NULL: a global preset. owner_key is account_sid or '' so one unique index
-- covers both scopes.
CREATE TABLE stt_dictionaries (
    sid TEXT PRIMARY KEY,
    account_sid TEXT REFERENCES accounts(sid) ON DELETE CASCADE,
    owner_key TEXT NOT NULL,
    name TEXT NOT NULL,
    language TEXT NOT NULL,
    language_key TEXT NOT NULL,
    description TEXT NOT NULL,
    tokens TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL
);
CREATE UNIQUE INDEX stt_dictionaries_name ON stt_dictionaries(owner_key, name, language_key);
