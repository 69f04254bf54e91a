//! Random ids and secrets, and how secrets are kept (hashed, compared in constant time).

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// `n` random bytes as lowercase hex. Randomness failing is a platform fault.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    if getrandom::fill(&mut bytes).is_err() {
        // No entropy source is a broken platform; fail loudly rather than mint weak ids.
        panic!("no system randomness available");
    }
    hex::encode(bytes)
}

/// A prefixed id such as `msg_3f2a…` (16 random bytes).
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_hex(16))
}

/// The event id of a streamed part (a text part, a tool call), derived from its part key:
/// every version of the part is told and stored under the same id without looking it up.
/// Part keys are unique within a session's timeline, and so are these ids.
pub fn part_event_id(part_key: &str) -> String {
    let digest = Sha256::digest(format!("part:{part_key}").as_bytes());
    format!("evt_{}", hex::encode(&digest[..16]))
}

/// A fresh bearer secret: 32 random bytes.
pub fn new_secret() -> String {
    random_hex(32)
}

/// What is stored of a secret: its SHA-256, hex.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Constant-time equality of two stored hashes.
pub fn hashes_equal(a: &str, b: &str) -> bool {
    bool::from(a.as_bytes().ct_eq(b.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_prefixed() {
        let a = new_id("msg");
        let b = new_id("msg");
        assert_ne!(a, b);
        assert!(a.starts_with("msg_") && a.len() == 36);
        assert_eq!(new_secret().len(), 64);
    }

    #[test]
    fn a_parts_id_follows_from_its_key() {
        let a = part_event_id("tool:c1");
        assert_eq!(a, part_event_id("tool:c1"));
        assert_ne!(a, part_event_id("tool:c2"));
        assert!(a.starts_with("evt_") && a.len() == 36, "{a}");
    }

    #[test]
    fn hashing_is_sha256() {
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(hashes_equal(&hash_secret("x"), &hash_secret("x")));
        assert!(!hashes_equal(&hash_secret("x"), &hash_secret("y")));
    }
}
