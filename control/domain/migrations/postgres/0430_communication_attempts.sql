-- Every dial of an outbound communication (postgres): written in the same transaction as the
-- call's end. The communication's own fields show its last attempt; the frequency cap of a
-- strategy and the sticky caller ID read an account's earlier attempts to one number.
CREATE TABLE communication_attempts (
    communication_sid TEXT NOT NULL REFERENCES communications(sid) ON DELETE CASCADE,
    n BIGINT NOT NULL,
    account_sid TEXT NOT NULL,
    recipient TEXT NOT NULL,
    started_at TIMESTAMPTZ,
    ended_at TIMESTAMPTZ NOT NULL,
    from_number TEXT NOT NULL,
    trunk TEXT,
    sip_code BIGINT,
    call_status TEXT,
    end_reason TEXT,
    amd TEXT,
    outcome TEXT,
    PRIMARY KEY (communication_sid, n)
);
CREATE INDEX communication_attempts_recipient ON communication_attempts(account_sid, recipient, ended_at);
