-- Intent classifiers (adapters). One row per immutable classifier version, addressed by
-- (account, classifier id, version). The account foreign key cascades, so the hard tenant
-- purge removes an account's classifiers and their trained models with it.
CREATE TABLE classifier_versions (
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    classifier_id TEXT NOT NULL,
    version BIGINT NOT NULL,
    model_id TEXT NOT NULL,
    description TEXT NOT NULL,
    intents TEXT NOT NULL,
    content_hash TEXT NOT NULL,
    content_identity TEXT NOT NULL,
    training_state TEXT NOT NULL,
    training_reason TEXT,
    failure_reason TEXT,
    queued_at TIMESTAMPTZ,
    state_changed_at TIMESTAMPTZ,
    created_at TIMESTAMPTZ NOT NULL,
    model TEXT,
    PRIMARY KEY (account_sid, classifier_id, version)
);
-- Identical content resolves to the held version: at most one version per content.
CREATE UNIQUE INDEX classifier_versions_content ON classifier_versions(account_sid, classifier_id, content_hash);
CREATE INDEX classifier_versions_state ON classifier_versions(training_state, queued_at);
