-- A hang-up asked on a node that does not run the call: the API marks the live row, and
-- the node holding its claim (claim_token) sees the mark at its next heartbeat and hangs
-- the call up. Cleared with the call's end.
ALTER TABLE communications ADD COLUMN hangup_requested_at TIMESTAMPTZ;
