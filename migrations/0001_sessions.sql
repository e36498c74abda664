-- The Postgres session store (`turn-manager run --store postgres://...`): what the state folder holds as files.

-- One row per channel: its session as the engine serializes it (the same JSON as `state/channels/<id>.json`).
CREATE TABLE sessions (
    channel_id  BIGINT PRIMARY KEY,
    -- The channel's server once known: a process resumes only the sessions of servers on its shards (spec 12).
    guild_id    BIGINT NULL,
    session     JSONB NOT NULL,
    -- Running, paused, or with effects left to carry out: a process resumes it at start or when it is orphaned.
    resumable   BOOLEAN NOT NULL,
    -- Which lease (its epoch) and which write of that lease saved this row: a lazy save that reaches the database
    -- after a later durable save of the same lease is dropped instead of putting older activity back.
    lease_epoch BIGINT NOT NULL DEFAULT 0,
    write_seq   BIGINT NOT NULL DEFAULT 0,
    updated_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Start-up and the orphan watch look for the resumable sessions of some shards.
CREATE INDEX sessions_resumable ON sessions (guild_id) WHERE resumable;

-- Every history event of every channel, never truncated (the `<id>.history.jsonl` log): `n` counts a channel's
-- events from 1, so the primary key is also the index for "the last N events of a channel".
CREATE TABLE history (
    channel_id BIGINT NOT NULL,
    n          BIGINT NOT NULL,
    at         TIMESTAMPTZ NOT NULL,
    event      JSONB NOT NULL,
    PRIMARY KEY (channel_id, n)
);

-- Which process acts for a channel. A claim takes a free or expired lease and bumps `epoch`; every save checks
-- that the lease still has the saver's owner and epoch (fencing), in the save's own transaction. Rows are never
-- deleted (a release only expires them), so epochs only grow.
CREATE TABLE leases (
    channel_id BIGINT PRIMARY KEY,
    owner      TEXT NOT NULL,
    epoch      BIGINT NOT NULL,
    -- From the database's clock, never a process's: processes on several machines compare against one clock.
    expires_at TIMESTAMPTZ NOT NULL
);

CREATE INDEX leases_owner ON leases (owner);
