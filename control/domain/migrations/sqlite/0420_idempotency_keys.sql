-- Idempotency keys (sqlite): the first request an account sent with an Idempotency-Key
-- header, by a hash of its method, path and body, and the resource it created
-- (resource_sid NULL while that first request is still running).
CREATE TABLE idempotency_keys (
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    idem_key TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    resource_sid TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (account_sid, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys(created_at);
