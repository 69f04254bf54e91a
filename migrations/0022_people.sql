-- One person across every door. A person is a `users` row (the identity they sign in
-- with: github:<id>); the other identities they are known by elsewhere (slack:<id>,
-- linear:<id>) link to it. A linked identity acts as the person: presence, "my
-- sessions", rate limits, commits and pull requests.
CREATE TABLE identity_links (
    identity TEXT PRIMARY KEY,       -- slack:U123, linear:<uuid>
    user_id TEXT NOT NULL,
    display_name TEXT NOT NULL,      -- as the other service names them, when linked
    rule TEXT NOT NULL,              -- code (proven both ways) | email (verified addresses equal)
    linked_at INTEGER NOT NULL
);
CREATE INDEX identity_links_user ON identity_links(user_id);

-- One-time link codes handed to an identity (a DM from the bot): single use, 10 minutes,
-- stored as their SHA-256.
CREATE TABLE link_codes (
    code_hash TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    display_name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);

-- The verified addresses a sign-in reported (every one, not only the primary): the email
-- rule links on these only.
CREATE TABLE user_emails (
    user_id TEXT NOT NULL,
    email TEXT NOT NULL,             -- lower case
    PRIMARY KEY (user_id, email)
);
CREATE INDEX user_emails_email ON user_emails(email);

-- Roles given in the app (ADMIN_USERS names admins by setting; those are not rows here).
CREATE TABLE user_roles (
    user_id TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('admin', 'member')),
    updated_by TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
