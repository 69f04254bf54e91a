-- The model a session made from an environment uses when it names none.
ALTER TABLE environments ADD COLUMN default_model TEXT;
