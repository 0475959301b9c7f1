-- Coordination between the instances sharing the database (docs/scale-out.md):
-- a lease names something exactly one instance may do at a time (coordinate
-- an experiment on one element); group is the holder's unit of work (the
-- experiment), which limits count; expires_ms is the holder's clock, renewed
-- while it works.
CREATE TABLE leases (
    name       text  COLLATE "C" PRIMARY KEY,
    grp        text  COLLATE "C" NOT NULL,
    owner      text  COLLATE "C" NOT NULL,
    payload    bytea NOT NULL,
    expires_ms bigint NOT NULL
);

-- What the other instances hand the lease holder (the front requests they saw
-- during an experiment), in batches numbered per writer; the holder takes and
-- deletes them.
CREATE TABLE lease_samples (
    grp     text   COLLATE "C" NOT NULL,
    shard   text   COLLATE "C" NOT NULL,
    seq     bigint NOT NULL,
    payload bytea  NOT NULL,
    PRIMARY KEY (grp, shard, seq)
);
