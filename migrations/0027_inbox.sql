-- A person's inbox: the sessions that need them, unread until opened. One row per event
-- and person (`event_key`: a prompt's end, a mention, a pull request's change, a run's
-- failure), so an event told twice makes one item.
CREATE TABLE inbox_items (
    id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    detail TEXT NOT NULL,
    url TEXT NOT NULL,
    event_key TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    read_at INTEGER,
    UNIQUE (user_id, event_key)
);
CREATE INDEX inbox_items_by_user ON inbox_items (user_id, created_at DESC);
CREATE INDEX inbox_items_unread ON inbox_items (user_id, session_id) WHERE read_at IS NULL;

-- Where each person wants each kind told (JSON: kind → {browser, push, slack}).
CREATE TABLE notification_prefs (
    user_id TEXT PRIMARY KEY,
    prefs TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- Browsers subscribed to Web Push (RFC 8030), with the keys their pushes are encrypted
-- to (RFC 8291). A push service's 404 or 410 removes the row.
CREATE TABLE push_subscriptions (
    endpoint TEXT PRIMARY KEY,
    user_id TEXT NOT NULL,
    p256dh TEXT NOT NULL,
    auth TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    last_sent_at INTEGER
);
CREATE INDEX push_subscriptions_by_user ON push_subscriptions (user_id, created_at);
