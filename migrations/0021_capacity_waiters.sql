-- Sessions waiting for room to start a sandbox (the provider was at capacity), in the
-- order they began to wait: a session whose sandbox stops wakes the oldest at once. A
-- session leaves when its spawn is taken, or when it is woken and no longer waits.
CREATE TABLE capacity_waiters (
  session_id TEXT PRIMARY KEY,
  since INTEGER NOT NULL
);
CREATE INDEX capacity_waiters_by_since ON capacity_waiters (since, session_id);
