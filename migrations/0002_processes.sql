-- The processes sharing the database and the shard layout each runs (`--shards A-B --total-shards N`; a process
-- without them runs shard 0 of 1). Every process must use the same total, or Discord sends some servers' events to no
-- process (their channels wait) and others' to two: each process says its layout here, renewed with its leases and
-- removed at its stop, and warns of live processes whose total differs. Rows of processes that died expire.
CREATE TABLE processes (
    owner        TEXT PRIMARY KEY,
    total_shards INT NOT NULL,
    first_shard  INT NOT NULL,
    last_shard   INT NOT NULL,
    -- From the database's clock, as the leases' are.
    expires_at   TIMESTAMPTZ NOT NULL
);
