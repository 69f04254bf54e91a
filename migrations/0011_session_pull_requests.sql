-- Which session holds which pull request, so a change on GitHub (a `pull_request` or
-- `pull_request_review` delivery, or the periodic check of the ones still open) reaches the
-- session's artifact. `checked_at` is when GitHub was last asked about it.
CREATE TABLE session_pull_requests (
    owner TEXT NOT NULL COLLATE NOCASE,
    repo TEXT NOT NULL COLLATE NOCASE,
    number INTEGER NOT NULL,
    session_id TEXT NOT NULL,
    state TEXT NOT NULL,
    url TEXT,
    updated_at INTEGER NOT NULL,
    checked_at INTEGER NOT NULL,
    PRIMARY KEY (owner, repo, number, session_id)
);
CREATE INDEX session_pull_requests_unsettled ON session_pull_requests (checked_at)
    WHERE state IN ('open', 'draft');
