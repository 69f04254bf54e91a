-- Slack channel triggers: a thread a watched channel's message started (an automation's
-- session) is continued by any reply in it, not only by mentions of the bot.
ALTER TABLE slack_threads ADD COLUMN kind TEXT NOT NULL DEFAULT 'mention';
-- The automation whose channel trigger started it: only people it admits go on in it.
ALTER TABLE slack_threads ADD COLUMN automation_id TEXT;
