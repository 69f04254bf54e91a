-- The sessions index: what lists across sessions need. Each session's Durable Object is
-- the truth for that session and keeps these rows up to date.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY,
    title TEXT,
    status TEXT NOT NULL,
    repo_owner TEXT,
    repo_name TEXT,
    repositories TEXT NOT NULL DEFAULT '[]',
    created_by TEXT NOT NULL,
    created_by_name TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);
CREATE INDEX sessions_by_created ON sessions (created_at DESC, id DESC);
CREATE INDEX sessions_by_status ON sessions (status, created_at DESC, id DESC);
CREATE INDEX sessions_by_repo ON sessions (repo_owner, repo_name, created_at DESC);

CREATE TABLE session_participants (
    session_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    PRIMARY KEY (session_id, user_id)
);
CREATE INDEX session_participants_by_user ON session_participants (user_id, session_id);
