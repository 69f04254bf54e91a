-- The deployment's choice of models (`PUT /settings/models`): one row, the settings as JSON
-- (the enabled models and the default), replaced whole.
CREATE TABLE IF NOT EXISTS model_settings (
  id TEXT PRIMARY KEY CHECK (id = 'deployment'),
  settings TEXT NOT NULL,
  updated_by TEXT NOT NULL,
  updated_at INTEGER NOT NULL
);
