-- Records: one window of one statistic of one writer (shard). The primary key
-- leads with (kind, key, window_start), the order of Scan, and the table is
-- clustered on it (WITHOUT ROWID). Text compares bytewise (BINARY), as in
-- PostgreSQL with COLLATE "C".
CREATE TABLE records (
    kind         TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    window_start INTEGER NOT NULL,
    shard        TEXT    NOT NULL,
    resolution   INTEGER NOT NULL CHECK (resolution > 0),
    payload      BLOB    NOT NULL,
    PRIMARY KEY (kind, key, window_start, shard, resolution)
) WITHOUT ROWID;

-- Retention, downsampling and time-range key listings.
CREATE INDEX records_kind_window ON records (kind, window_start);
