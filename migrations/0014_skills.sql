-- Managed skills: one row per skill (its newest revision, whether it is enabled, where it
-- applies), and every revision's content, kept (a session pins revisions; a deleted
-- skill's revisions stay for the sessions that use them).
CREATE TABLE IF NOT EXISTS skills (
  name TEXT PRIMARY KEY,
  revision INTEGER NOT NULL,
  enabled INTEGER NOT NULL,
  assignments TEXT NOT NULL,
  deleted_at INTEGER,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS skill_revisions (
  name TEXT NOT NULL,
  revision INTEGER NOT NULL,
  description TEXT NOT NULL,
  instructions TEXT NOT NULL,
  files TEXT NOT NULL,
  skill_md TEXT NOT NULL,
  digest TEXT NOT NULL,
  created_by TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY (name, revision)
);
