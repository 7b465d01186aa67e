-- The do-not-call list of an account (sqlite): E.164 numbers its calls never dial. Checked
-- when a communication is dispatched and again when the dialer is about to place it.
CREATE TABLE do_not_call (
    account_sid TEXT NOT NULL REFERENCES accounts(sid) ON DELETE CASCADE,
    tenant_sid TEXT NOT NULL REFERENCES tenants(sid) ON DELETE CASCADE,
    number TEXT NOT NULL,
    source TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (account_sid, number)
);
CREATE INDEX do_not_call_account ON do_not_call(account_sid, created_at);
