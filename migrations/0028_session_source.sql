-- The door each session came through (web, api, slack, github, linear, automation,
-- child), for the analytics page's "by source". Sessions made before this are counted as
-- the web's.
ALTER TABLE sessions ADD COLUMN source TEXT NOT NULL DEFAULT 'web';
