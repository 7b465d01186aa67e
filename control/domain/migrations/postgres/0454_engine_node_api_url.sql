-- The address this node's control API is reached at by its peers (`http.internal_url`,
-- operator configuration): a peer serving the live view of a call this node runs relays
-- it from there. NULL: the node publishes none.
ALTER TABLE engine_nodes ADD COLUMN api_url TEXT;
