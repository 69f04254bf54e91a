-- GitHub as a source and destination.

-- A person's GitHub OAuth token, sealed like a secret (AES-256-GCM under the secrets key),
-- so pull requests the agent opens for them are authored as them.
CREATE TABLE user_github_tokens (
    user_id TEXT PRIMARY KEY,       -- github:<numeric id>
    sealed_access TEXT NOT NULL,
    sealed_refresh TEXT,
    expires_at INTEGER,             -- ms; NULL = does not expire
    refresh_expires_at INTEGER,
    updated_at INTEGER NOT NULL
);

-- Webhook deliveries seen, by X-GitHub-Delivery: `processing` while the bot works on one,
-- `processed` after. A failed one is deleted so GitHub's redelivery can try again.
CREATE TABLE github_deliveries (
    delivery_id TEXT PRIMARY KEY,
    event TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    session_id TEXT,
    received_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Per-repository settings (JSON, RepoSettings), for local and GitHub repositories alike.
CREATE TABLE repo_settings (
    owner TEXT NOT NULL COLLATE NOCASE,
    name TEXT NOT NULL COLLATE NOCASE,
    settings TEXT NOT NULL,
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
);

-- The newest pull request a session has (lists mark sessions that have one).
ALTER TABLE sessions ADD COLUMN pr_url TEXT;
ALTER TABLE sessions ADD COLUMN pr_state TEXT;

-- Repositories the GitHub App's installation can reach, synced from GitHub (kind
-- 'github'); local ones keep kind 'local'.
ALTER TABLE repositories ADD COLUMN private INTEGER NOT NULL DEFAULT 0;
ALTER TABLE repositories ADD COLUMN description TEXT;
ALTER TABLE repositories ADD COLUMN remote_updated_at TEXT;
ALTER TABLE repositories ADD COLUMN synced_at INTEGER;
CREATE TABLE github_sync (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    synced_at INTEGER NOT NULL,
    repositories INTEGER NOT NULL,
    error TEXT
);

-- Rate limits: recent events per key (e.g. `sessions:<user id>`), a sliding window.
CREATE TABLE rate_events (
    key TEXT NOT NULL,
    at INTEGER NOT NULL
);
CREATE INDEX rate_events_by_key ON rate_events (key, at);

-- Environments say what they are for.
ALTER TABLE environments ADD COLUMN description TEXT;
