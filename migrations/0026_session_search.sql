-- The prompts' text (the first 4 KiB), written by each session's object with its index row,
-- so `GET /sessions?q=` finds a session by what was asked as well as by its title,
-- repositories and author.
ALTER TABLE sessions ADD COLUMN prompt_text TEXT NOT NULL DEFAULT '';
