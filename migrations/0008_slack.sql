-- Slack as a front door.

-- Event deliveries seen, by event_id: Slack's retries never make a second session.
CREATE TABLE slack_events (
    event_id TEXT PRIMARY KEY,
    received_at INTEGER NOT NULL,
    outcome TEXT
);

-- A thread's session (kept 7 days from its last prompt), and the last message prompted
-- from it, so a follow-up adds only newer messages as context.
CREATE TABLE slack_threads (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    session_id TEXT NOT NULL,
    target TEXT NOT NULL,
    target_label TEXT NOT NULL,
    last_prompt_ts TEXT,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);

-- A request waiting for the person to pick a repository or environment (an hour).
CREATE TABLE slack_pending (
    channel TEXT NOT NULL,
    thread_ts TEXT NOT NULL,
    request TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (channel, thread_ts)
);

-- Routing rules and channel associations (JSON, SlackSettings).
CREATE TABLE slack_settings (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    settings TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- A person's App Home preferences (JSON: model, reasoningEffort, branch).
CREATE TABLE slack_preferences (
    user_id TEXT PRIMARY KEY,
    preferences TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
