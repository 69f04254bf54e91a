-- The threads the bot's reviews started: a reply in one continues the session that wrote
-- the review. Owner and name are kept lower-cased.
CREATE TABLE github_review_threads (
    owner TEXT NOT NULL,
    repo TEXT NOT NULL,
    comment_id INTEGER NOT NULL,
    number INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (owner, repo, comment_id)
);
