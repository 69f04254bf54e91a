-- Brokered model access (inspect-models, grants): an OAuth grant per provider and scope.
-- The refresh token and the current access token are sealed with
-- REPO_SECRETS_ENCRYPTION_KEY; a rotated refresh token replaces the old one in place.
CREATE TABLE model_grants (
    id TEXT PRIMARY KEY,
    provider TEXT NOT NULL,
    scope_kind TEXT NOT NULL,
    scope_id TEXT NOT NULL DEFAULT '',
    token_url TEXT NOT NULL,
    client_id TEXT NOT NULL,
    refresh_sealed TEXT NOT NULL,
    access_sealed TEXT,
    access_expires_at INTEGER,
    status TEXT NOT NULL DEFAULT 'active',
    status_reason TEXT,
    updated_at INTEGER NOT NULL,
    updated_by TEXT NOT NULL,
    UNIQUE (provider, scope_kind, scope_id)
);
