-- Linear as a front door (inspect-linear).

-- Each delivery (its Linear-Delivery id) is acted on once; kept a day.
CREATE TABLE linear_deliveries (
    delivery_id TEXT PRIMARY KEY,
    received_at INTEGER NOT NULL,
    outcome TEXT
);
CREATE INDEX linear_deliveries_received ON linear_deliveries (received_at);

-- A workspace the app was installed in, and the app's client-credentials token for it
-- (sealed with REPO_SECRETS_ENCRYPTION_KEY), renewed before it expires or after a 401.
CREATE TABLE linear_installations (
    organization_id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL,
    app_user_id TEXT NOT NULL,
    installed_at INTEGER NOT NULL,
    installed_by TEXT,
    token_sealed TEXT,
    token_expires_at INTEGER
);

-- An install begun: its one-time state (SHA-256), good for ten minutes.
CREATE TABLE linear_oauth_states (
    state_hash TEXT PRIMARY KEY,
    created_at INTEGER NOT NULL,
    created_by TEXT
);

-- A Linear agent session and the session working it; while the person is asked where to
-- work, `pending` holds what is needed to start once they answer (and no session yet).
CREATE TABLE linear_agent_sessions (
    agent_session_id TEXT PRIMARY KEY,
    organization_id TEXT NOT NULL,
    issue_id TEXT NOT NULL,
    issue_identifier TEXT NOT NULL,
    session_id TEXT,
    target TEXT,
    pending TEXT,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    stopped_at INTEGER
);
CREATE INDEX linear_agent_sessions_session ON linear_agent_sessions (session_id);

-- The team and project mappings, whether issues move on start, whether tools are shown.
CREATE TABLE linear_settings (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    settings TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
