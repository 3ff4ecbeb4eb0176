-- lease-postgres schema version 1 (RFC 002 execution leases).
-- `{s}` is replaced by the quoted schema name. Every timestamp is milliseconds since the Unix
-- epoch (bigint); every JSON payload is canonical text (lease_core::Json), compared bytewise.

-- Fencing tokens: ONE counter per schema, so tokens are unique across executions.
CREATE SEQUENCE {s}.fencing_tokens AS bigint MINVALUE 1 START 1;

-- The redelivery delay: delays[min(n, len)] for n >= 1 unacknowledged deliveries, 0 for n = 0.
-- `delays` is RedeliveryPolicy::table_ms(), passed by the caller.
CREATE FUNCTION {s}.redelivery_delay(delays bigint[], n bigint) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN n <= 0 OR coalesce(cardinality(delays), 0) = 0 THEN 0::bigint
        ELSE delays[least(n, cardinality(delays))::integer]
    END
$$;

-- The earliest instant at which a row is claimable, from its STORED fields (NULL: never until
-- it changes). A running row is claimable once its lease has expired AND the redelivery delay
-- for that expiry (an unacknowledged delivery ended at the expiry) has passed AND it is due
-- (due_at or a wake requested during the delivery). Any other non-terminal row is claimable
-- once due and past the delay after its last unacknowledged delivery. The claim's inner
-- SELECT is then one range scan of `claimable_at <= now`.
CREATE FUNCTION {s}.claimable_from(
    status text, due bigint, wake bigint, expires bigint, unacked bigint, ended bigint,
    delays bigint[]
) RETURNS bigint
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN status IN ('completed', 'failed') THEN NULL
        WHEN status = 'running' THEN
            CASE
                WHEN least(due, wake) IS NULL THEN NULL
                WHEN expires IS NULL THEN least(due, wake)
                ELSE greatest(least(due, wake),
                              expires + {s}.redelivery_delay(delays, unacked + 1))
            END
        WHEN due IS NULL THEN NULL
        WHEN unacked = 0 OR ended IS NULL THEN due
        ELSE greatest(due, ended + {s}.redelivery_delay(delays, unacked))
    END
$$;

CREATE TABLE {s}.executions (
    id                        text COLLATE "C" PRIMARY KEY,
    workflow                  text,
    input                     text,
    status                    text NOT NULL
        CHECK (status IN ('admitted', 'running', 'suspended', 'completed', 'failed')),
    token                     bigint NOT NULL DEFAULT 0 CHECK (token >= 0),
    lease_expires_at          bigint,
    due_at                    bigint,
    wake_after_claim          bigint,
    unacknowledged_deliveries bigint NOT NULL DEFAULT 0 CHECK (unacknowledged_deliveries >= 0),
    last_delivery_ended_at    bigint,
    ever_suspended            boolean NOT NULL DEFAULT false,
    outcome                   text,
    claimable_at              bigint
);

CREATE INDEX executions_claimable_at ON {s}.executions (claimable_at)
    WHERE claimable_at IS NOT NULL;

CREATE TABLE {s}.steps (
    execution_id text COLLATE "C" NOT NULL,
    step_key     text COLLATE "C" NOT NULL,
    step_attempt bigint NOT NULL CHECK (step_attempt >= 0),
    done         boolean NOT NULL,
    response     text NOT NULL,
    token        bigint NOT NULL,
    PRIMARY KEY (execution_id, step_key, step_attempt)
);

CREATE TABLE {s}.stores (
    store_id text COLLATE "C" PRIMARY KEY
);

CREATE TABLE {s}.store_entries (
    store_id  text COLLATE "C" NOT NULL,
    entry_key text COLLATE "C" NOT NULL,
    value     text NOT NULL,
    PRIMARY KEY (store_id, entry_key)
);

CREATE TABLE {s}.store_receipts (
    store_id     text COLLATE "C" NOT NULL,
    execution_id text COLLATE "C" NOT NULL,
    step_key     text COLLATE "C" NOT NULL,
    applied      boolean NOT NULL,
    previous     text,
    PRIMARY KEY (store_id, execution_id, step_key)
);

CREATE TABLE {s}.start_requests (
    request_id text COLLATE "C" PRIMARY KEY,
    target     text COLLATE "C" NOT NULL
);
