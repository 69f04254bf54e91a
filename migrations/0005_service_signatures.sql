-- Service signatures already accepted, kept until their 5-minute window has passed, so a
-- captured request cannot be replayed inside the window either.
CREATE TABLE service_signatures (
    signature_hash TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
CREATE INDEX service_signatures_expiry ON service_signatures(expires_at);
