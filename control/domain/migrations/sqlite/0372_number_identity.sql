-- One active number per phone number across the whole service (SQLite).
-- `routing_key` is the identifier in the form inbound calls are matched by
-- (store::numbers::routing_key): its digits, less a leading international prefix `00`,
-- so `+4930…`, `4930…` and `004930…` are one number. At most one active row holds a
-- key, in any account of any tenant; the database enforces it, so racing writers cannot
-- both win.
ALTER TABLE numbers ADD COLUMN routing_key TEXT NOT NULL DEFAULT '';
UPDATE numbers SET routing_key = ltrim(identifier, '+');
UPDATE numbers SET routing_key = substr(routing_key, 3) WHERE routing_key LIKE '00%';

-- Where several active rows share a key, the oldest (by created_at, then sid) keeps it,
-- being the one inbound calls were routed to; the later ones are set inactive (their
-- owners see status inactive and may take the number back once it is free).
UPDATE numbers SET status = 'inactive', updated_at = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')
WHERE status = 'active' AND EXISTS (
    SELECT 1 FROM numbers older
    WHERE older.status = 'active' AND older.routing_key = numbers.routing_key
      AND (older.created_at < numbers.created_at
           OR (older.created_at = numbers.created_at AND older.sid < numbers.sid)));

CREATE UNIQUE INDEX numbers_active_routing_key ON numbers(routing_key) WHERE status = 'active';
