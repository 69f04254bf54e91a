-- A sign-in's state also keeps which provider it is for, and for OpenID Connect (Google)
-- the nonce the id_token must carry and the PKCE verifier the code is traded with. A
-- state is taken only by its own provider's callback.
ALTER TABLE oauth_states ADD COLUMN provider TEXT NOT NULL DEFAULT 'github';
ALTER TABLE oauth_states ADD COLUMN nonce TEXT;
ALTER TABLE oauth_states ADD COLUMN code_verifier TEXT;
