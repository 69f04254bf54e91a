//! Session ids that say they are ours. A Durable Object exists once anything addresses it,
//! so the Worker must not hand a made-up id to the runtime: an id it minted carries a tag
//! (HMAC-SHA256 of its random part under a key derived from the deployment's secrets key)
//! that is checked without any I/O. Ids without a good tag (made before tags, or where no
//! key is set) are looked up in D1 instead.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of randomness in an id, and of the tag after it (hex: 32 + 16 characters).
pub const RANDOM_BYTES: usize = 16;
const TAG_BYTES: usize = 8;
const DOMAIN: &[u8] = b"open-inspect session id v1";

/// The id key, derived from the deployment's secrets key (never the key itself).
pub fn id_key(secrets_key: &str) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(secrets_key.as_bytes())
        .expect("HMAC takes keys of any length");
    mac.update(DOMAIN);
    mac.finalize().into_bytes().into()
}

fn tag(key: &[u8; 32], random_hex: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(random_hex.as_bytes());
    mac
}

/// A new id: the random part in hex, then its tag when there is a key.
pub fn mint(key: Option<&[u8; 32]>, random: &[u8; RANDOM_BYTES]) -> String {
    let random_hex = hex::encode(random);
    match key {
        Some(key) => {
            let t = tag(key, &random_hex).finalize().into_bytes();
            format!("{random_hex}{}", hex::encode(&t[..TAG_BYTES]))
        }
        None => random_hex,
    }
}

/// Whether `id` carries a good tag under `key` (compared in constant time).
pub fn vouched(key: &[u8; 32], id: &str) -> bool {
    // Exactly as minted: lower-case hex (object names are case-sensitive).
    if id.len() != 2 * (RANDOM_BYTES + TAG_BYTES)
        || !id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return false;
    }
    let (random_hex, tag_hex) = id.split_at(2 * RANDOM_BYTES);
    let Ok(given) = hex::decode(tag_hex) else {
        return false;
    };
    tag(key, random_hex).verify_truncated_left(&given).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minted_ids_are_vouched_for_and_made_up_ones_are_not() {
        let key = id_key("a secrets key");
        let id = mint(Some(&key), &[0xab; RANDOM_BYTES]);
        assert_eq!(id.len(), 48);
        assert!(vouched(&key, &id));
        assert!(!vouched(&id_key("another key"), &id));
        let mut forged = id.clone();
        forged.replace_range(47.., if id.ends_with('0') { "1" } else { "0" });
        assert!(!vouched(&key, &forged));
        assert!(!vouched(&key, &id[..32]));
        assert!(!vouched(&key, &id.to_ascii_uppercase()));
        assert!(!vouched(&key, "made-up-session"));
        assert_eq!(mint(None, &[7; RANDOM_BYTES]).len(), 32);
    }
}
