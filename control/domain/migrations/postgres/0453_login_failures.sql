-- Failed logins counted in the database, so every node of a cluster counts the same
-- failures (auth::throttle): one row per key (`email:<sha256>` of a normalised email,
-- `address:<ip>` of a source address or IPv6 /64) with the failures of its window, which
-- opened at `since`. Rows whose window has passed are deleted as logins come.
CREATE TABLE login_failures (
    key TEXT PRIMARY KEY,
    failures BIGINT NOT NULL,
    since TIMESTAMPTZ NOT NULL
);
CREATE INDEX login_failures_since ON login_failures(since);
