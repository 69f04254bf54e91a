-- The D1 index: what lists across sessions need. The SessionDO is the truth for one
-- session; this is the truth across sessions.

-- Proves migrations were applied (read by /health).
CREATE TABLE schema_migrations_marker (id INTEGER PRIMARY KEY, note TEXT NOT NULL);
INSERT INTO schema_migrations_marker (id, note) VALUES (1, 'initial');
