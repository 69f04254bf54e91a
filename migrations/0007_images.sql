-- Prebuilt images: a repository's or an environment's workspace cloned and set up ahead
-- of time by the sandbox provider.

-- One row per build. The provider reports back once with the single-use callback token
-- (its SHA-256 kept here, cleared when used).
CREATE TABLE image_builds (
    id TEXT PRIMARY KEY,
    scope_kind TEXT NOT NULL,          -- repository | environment
    scope_key TEXT NOT NULL,           -- owner/name (lower case) | environment id
    status TEXT NOT NULL,              -- building | ready | failed | deleted
    trigger TEXT NOT NULL,             -- manual | schedule
    callback_hash TEXT,
    image_id TEXT,
    runtime_version TEXT,
    repositories TEXT NOT NULL DEFAULT '[]',  -- JSON [{owner, name, commit}]
    error TEXT,
    output TEXT,
    bytes INTEGER,
    started_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX image_builds_by_scope ON image_builds (scope_kind, scope_key, started_at DESC);
CREATE INDEX image_builds_by_status ON image_builds (status, started_at);

-- When the cron trigger rebuilds a scope's image, and how many ready images are kept.
CREATE TABLE image_schedules (
    scope_kind TEXT NOT NULL,
    scope_key TEXT NOT NULL,
    interval_minutes INTEGER,          -- NULL: by hand only
    keep INTEGER NOT NULL DEFAULT 2,
    origin TEXT,                       -- where builds report back when PUBLIC_URL is unset
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope_kind, scope_key)
);
