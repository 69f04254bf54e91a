-- One refresh at a time per grant (inspect-models, grant_store): the session that claims
-- the grant refreshes it until this time (ms); the others wait for its token instead of
-- sending the same refresh token again (a reuse that rotating providers punish).
ALTER TABLE model_grants ADD COLUMN refreshing_until INTEGER;
