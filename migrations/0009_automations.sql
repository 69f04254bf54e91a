-- Automations: sessions that start themselves, on a schedule or from an inbound webhook.

-- One automation. `settings` is what a person saved (JSON: name, trigger, repositories,
-- branch, model, instructions, conditions, schedule); the columns beside it are what the
-- control plane keeps. `next_run_at` is a schedule's next firing while it is enabled.
CREATE TABLE automations (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    trigger_type TEXT NOT NULL,
    settings TEXT NOT NULL,
    enabled INTEGER NOT NULL DEFAULT 1,
    paused_reason TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    next_run_at INTEGER,
    -- SHA-256 of a webhook's key (the key itself is shown once).
    webhook_key_hash TEXT,
    -- A Sentry trigger's client secret, sealed (AES-256-GCM with the secrets key).
    secret_sealed TEXT,
    -- Who made it (the actor its sessions are created as, JSON) and their user id.
    created_by TEXT NOT NULL,
    owner TEXT NOT NULL,
    -- The Worker's address when it was last saved: its sessions' links (PUBLIC_URL first).
    origin TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    deleted_at INTEGER
);
CREATE INDEX automations_due ON automations (next_run_at)
    WHERE enabled = 1 AND deleted_at IS NULL AND next_run_at IS NOT NULL;

-- One firing. `concurrency_key` makes a firing happen once: a schedule's slot, a webhook's
-- idempotency key, or a fresh id. Runs outlive their automation (history is kept).
CREATE TABLE automation_runs (
    id TEXT PRIMARY KEY,
    automation_id TEXT NOT NULL,
    trigger TEXT NOT NULL,
    concurrency_key TEXT NOT NULL,
    status TEXT NOT NULL,
    reason TEXT,
    created_at INTEGER NOT NULL,
    finished_at INTEGER,
    UNIQUE (automation_id, concurrency_key)
);
CREATE INDEX automation_runs_by_automation ON automation_runs (automation_id, created_at);
CREATE INDEX automation_runs_active ON automation_runs (status, created_at)
    WHERE status IN ('starting', 'running');

-- Each repository's session of a run (`repository` is owner/name, or '' for none).
CREATE TABLE automation_run_sessions (
    run_id TEXT NOT NULL,
    repository TEXT NOT NULL,
    session_id TEXT,
    status TEXT NOT NULL,
    error TEXT,
    PRIMARY KEY (run_id, repository)
);
CREATE INDEX automation_run_sessions_by_session ON automation_run_sessions (session_id);
