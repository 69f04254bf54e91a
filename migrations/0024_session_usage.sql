-- What each session has used, written by its object with the rest of its index row
-- (once a prompt is queued or ends, a sandbox stops, a pull request changes): prompts,
-- tool calls, the model's tokens and cost (millionths of a dollar) as the agent reported
-- them, sandbox time, and when its first pull request came.
ALTER TABLE sessions ADD COLUMN prompts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tool_calls INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tokens_in INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN tokens_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cost_micros INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN sandbox_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN first_pr_at INTEGER;
CREATE INDEX sessions_by_creator ON sessions (created_by, created_at);
