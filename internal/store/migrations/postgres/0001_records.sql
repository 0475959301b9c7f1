-- Records: one window of one statistic of one writer (shard). The primary key
-- leads with (kind, key, window_start), the order of Scan. COLLATE "C" makes
-- text order bytewise, whatever the database's locale, so that key order and
-- key-prefix ranges match SQLite's.
CREATE TABLE records (
    kind         text   COLLATE "C" NOT NULL,
    key          text   COLLATE "C" NOT NULL,
    window_start bigint NOT NULL,
    shard        text   COLLATE "C" NOT NULL,
    resolution   bigint NOT NULL CHECK (resolution > 0),
    payload      bytea  NOT NULL,
    PRIMARY KEY (kind, key, window_start, shard, resolution)
);

-- Retention, downsampling and time-range key listings.
CREATE INDEX records_kind_window ON records (kind, window_start);
