-- An environment's egress policy (JSON `EgressPolicy`; NULL: open).
ALTER TABLE environments ADD COLUMN egress TEXT;
