-- Repositories the control plane knows how to clone. In local mode these are plain git
-- repositories on the host, registered by path.
CREATE TABLE repositories (
    owner TEXT NOT NULL COLLATE NOCASE,
    name TEXT NOT NULL COLLATE NOCASE,
    source TEXT NOT NULL,
    kind TEXT NOT NULL,
    default_branch TEXT,
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner, name)
);
