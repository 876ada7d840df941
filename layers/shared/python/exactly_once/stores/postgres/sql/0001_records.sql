-- The idempotency records: one row per (scope, key), the fenced state machine's only state.
CREATE SCHEMA IF NOT EXISTS exactly_once;

CREATE TABLE exactly_once.records (
    -- "{scope}#{key}": the (scope, idempotency key) pair, written exactly as the DynamoDB store
    -- writes its partition key, so the tools show the same id on both.
    id                   text    PRIMARY KEY,
    scope                text    NOT NULL,
    status               text    NOT NULL CHECK (status IN ('IN_PROGRESS', 'COMPLETED', 'FAILED')),
    lock_token           text    NOT NULL,  -- every write after the acquire is fenced on it
    fence                bigint  NOT NULL,  -- strictly increases per id, across deletions too
    attempts             integer NOT NULL,
    owner                text,
    lease_expires_at_ms  bigint  NOT NULL,
    created_at_ms        bigint  NOT NULL,
    updated_at_ms        bigint  NOT NULL,
    expires_at_s         bigint  NOT NULL,  -- after it the row counts as absent; cleanup deletes it
    pending_at_ms        bigint,            -- IN_PROGRESS: the lease's end; FAILED: when it failed
    acquired_over        text,              -- what the last acquire replaced (NULL: a new row)
    fingerprint          text,
    expected_by_ms       bigint,
    result               text,              -- the codec's JSON
    result_sha256        text,
    result_size          bigint,
    result_omitted       text,
    error_type           text,
    error_message        text,
    error_retryable      boolean,
    error_at_ms          bigint,
    replay_nonce         text
);

-- The cleanup job deletes expired rows in batches by this index (no TTL magic here).
CREATE INDEX records_expires_at ON exactly_once.records (expires_at_s);

-- The "pending" listing (stuck locks, FAILED records for people): partial, so COMPLETED rows,
-- the vast majority, are not in it.
CREATE INDEX records_pending ON exactly_once.records (status, pending_at_ms)
    WHERE status <> 'COMPLETED';
