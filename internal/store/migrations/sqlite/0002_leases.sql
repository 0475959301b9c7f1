-- Coordination between the instances sharing the database (docs/scale-out.md):
-- see the PostgreSQL migration of the same number.
CREATE TABLE leases (
    name       TEXT    NOT NULL PRIMARY KEY,
    grp        TEXT    NOT NULL,
    owner      TEXT    NOT NULL,
    payload    BLOB    NOT NULL,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE lease_samples (
    grp     TEXT    NOT NULL,
    shard   TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    payload BLOB    NOT NULL,
    PRIMARY KEY (grp, shard, seq)
) WITHOUT ROWID;
