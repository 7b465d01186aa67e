-- A hang-up asked on a node that does not run the call: the API marks the live row, and
-- the node holding its claim (claim_token) sees the mark at its next heartbeat and hangs
-- the call up. Cleared with the call's end.
ALTER TABLE communications ADD COLUMN hangup_requested_at TIMESTAMPTZ;
-- Each node looks for the marks on its calls every heartbeat: only marked rows are indexed.
CREATE INDEX communications_hangup ON communications(claim_token) WHERE hangup_requested_at IS NOT NULL;
