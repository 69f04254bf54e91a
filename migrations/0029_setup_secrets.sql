-- A secret may be for set-up only: given to the repository's set-up and start hooks, never
-- to the agent, the terminals or any file the agent can read.
ALTER TABLE secrets ADD COLUMN setup_only INTEGER NOT NULL DEFAULT 0;
