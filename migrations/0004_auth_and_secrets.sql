-- People who signed in with GitHub, their browser sessions and personal API tokens.
-- Every token is stored as its SHA-256 (hex), never as itself.
CREATE TABLE users (
    id TEXT PRIMARY KEY,            -- github:<numeric id>
    login TEXT NOT NULL,
    name TEXT,
    email TEXT,
    avatar_url TEXT,
    created_at INTEGER NOT NULL,
    last_sign_in_at INTEGER NOT NULL
);

CREATE TABLE auth_sessions (
    token_hash TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES users(id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE INDEX auth_sessions_user ON auth_sessions(user_id);

-- OAuth `state` values handed out and not yet used (single use, 10 minutes).
CREATE TABLE oauth_states (
    state_hash TEXT PRIMARY KEY,
    return_to TEXT NOT NULL,
    expires_at INTEGER NOT NULL
);

CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    last_used_at INTEGER,
    revoked_at INTEGER
);
CREATE INDEX api_tokens_user ON api_tokens(user_id);

-- Named sets of repositories a session can target as one.
CREATE TABLE environments (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    repositories TEXT NOT NULL,     -- JSON: [{"owner","name","branch"?}], first is primary
    created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Secrets for sandboxes, sealed with AES-256-GCM (base64 of IV ‖ ciphertext).
CREATE TABLE secrets (
    scope TEXT NOT NULL,            -- global | repository | environment
    scope_id TEXT NOT NULL,         -- '' | owner/name (lower case) | environment id
    name TEXT NOT NULL,             -- upper case
    sealed TEXT NOT NULL,
    value_bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (scope, scope_id, name)
);
