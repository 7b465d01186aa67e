-- Engines on one database (sqlite): each writes its heartbeat here about every second; a
-- node whose heartbeat is older than `dialer.node_timeout_ms` is lost, and the first peer
-- that takes it over deletes its row in the same transaction that takes its calls.
CREATE TABLE engine_nodes (
    claim_token TEXT PRIMARY KEY,
    instance TEXT NOT NULL,
    started_at TEXT NOT NULL,
    seen_at TEXT NOT NULL
);
-- The SIP dialog of an answered call (callsmith_sip::DialogRecord as JSON), written with
-- the answer: a peer ends the call with a BYE built from it when the node running the
-- call is lost.
ALTER TABLE communications ADD COLUMN sip_dialog TEXT;
