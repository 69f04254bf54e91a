//! Secrets kept for sandboxes: which names are allowed, how large they may be, how they are
//! sealed at rest (AES-256-GCM, a 12-byte random IV in front, base64) and how the scopes
//! layer into one sandbox environment.
//!
//! Pure: the caller brings the key, the IV's randomness and the storage.

use aes_gcm::aead::{Aead, KeyInit};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
pub use inspect_protocol::auth::{SecretList, SecretSummary, SetSecrets};
use inspect_protocol::{ApiError, ErrorCode};
use std::collections::BTreeMap;

/// The Worker secret that holds the key (base64 of 32 bytes).
pub const KEY_VAR: &str = "REPO_SECRETS_ENCRYPTION_KEY";
/// At most this many secrets in one scope.
pub const MAX_PER_SCOPE: usize = 50;
/// At most this many bytes in one value.
pub const MAX_VALUE_BYTES: usize = 16 * 1024;
/// At most this many value bytes in one scope, all secrets together.
pub const MAX_SCOPE_BYTES: usize = 64 * 1024;
/// Longest name.
pub const MAX_NAME_LEN: usize = 256;

/// Names the sandbox runtime owns: a secret may not replace them.
const RESERVED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "SHELL",
    "PWD",
    "OLDPWD",
    "LANG",
    "TERM",
    "HOSTNAME",
    "TMPDIR",
    "IFS",
    "PS1",
    "NODE_OPTIONS",
    "PYTHONPATH",
    // Read by shells and interpreters as they start: code that runs before anything else.
    "BASH_ENV",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PROMPT_COMMAND",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RUBYLIB",
    "NODE_PATH",
];
/// Prefixes the sandbox runtime owns, or that change how programs load (the dynamic
/// linker, the agent's own settings, exported bash functions).
const RESERVED_PREFIXES: &[&str] = &[
    "INSPECT_",
    "OPENINSPECT_",
    "OPENCODE_",
    "TUNNEL_",
    "GIT_",
    "LD_",
    "SSH_",
    "BASH_FUNC_",
    "DYLD_",
];

/// Where a secret applies. The narrower scope wins when names collide.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    Global,
    /// `owner/name`, compared without case like repository names.
    Repository {
        owner: String,
        name: String,
    },
    Environment {
        id: String,
    },
}

impl Scope {
    /// The scope's kind and id as stored (`("repository", "acme/web")`).
    pub fn key(&self) -> (&'static str, String) {
        match self {
            Scope::Global => ("global", String::new()),
            Scope::Repository { owner, name } => (
                "repository",
                format!(
                    "{}/{}",
                    owner.to_ascii_lowercase(),
                    name.to_ascii_lowercase()
                ),
            ),
            Scope::Environment { id } => ("environment", id.clone()),
        }
    }

    /// How narrow the scope is; a higher rank wins.
    pub fn rank(kind: &str) -> u8 {
        match kind {
            "global" => 0,
            "repository" => 1,
            _ => 2,
        }
    }
}

/// Checks a name and gives its stored (upper-case) form.
pub fn normalize_name(name: &str) -> Result<String, ApiError> {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_');
    if !first_ok
        || name.len() > MAX_NAME_LEN
        || !bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return Err(ApiError::bad_request(
            "a secret name is 1-256 characters: a letter or '_', then letters, digits or '_'",
        ));
    }
    let upper = name.to_ascii_uppercase();
    if RESERVED.contains(&upper.as_str()) || RESERVED_PREFIXES.iter().any(|p| upper.starts_with(p))
    {
        return Err(ApiError::bad_request(format!(
            "{upper} is reserved for the sandbox runtime"
        )));
    }
    Ok(upper)
}

fn too_large(message: String) -> ApiError {
    ApiError::new(ErrorCode::PayloadTooLarge, message)
}

/// Checks a `PUT` against what the scope already holds (`existing`: stored name → value
/// size) and gives the normalized names with their values. Nothing is stored unless all
/// of it is acceptable.
pub fn plan_update(
    existing: &BTreeMap<String, usize>,
    update: &SetSecrets,
) -> Result<Vec<(String, String, bool)>, ApiError> {
    if update.secrets.is_empty() {
        return Err(ApiError::bad_request(
            "secrets must name at least one secret",
        ));
    }
    let mut setup = Vec::with_capacity(update.setup.len());
    for name in &update.setup {
        let name = normalize_name(name)?;
        if !update
            .secrets
            .keys()
            .any(|k| k.trim().eq_ignore_ascii_case(&name))
        {
            return Err(ApiError::bad_request(format!(
                "{name} is marked set-up only but not among the secrets sent"
            )));
        }
        setup.push(name);
    }
    let mut sizes = existing.clone();
    let mut out = Vec::with_capacity(update.secrets.len());
    for (name, value) in &update.secrets {
        let name = normalize_name(name)?;
        if value.len() > MAX_VALUE_BYTES {
            return Err(too_large(format!(
                "{name}: a value is at most {MAX_VALUE_BYTES} bytes"
            )));
        }
        if out
            .iter()
            .any(|(n, _, _): &(String, String, bool)| *n == name)
        {
            return Err(ApiError::bad_request(format!(
                "{name} is named twice (names are not case-sensitive)"
            )));
        }
        sizes.insert(name.clone(), value.len());
        let for_setup = setup.contains(&name);
        out.push((name, value.clone(), for_setup));
    }
    if sizes.len() > MAX_PER_SCOPE {
        return Err(too_large(format!(
            "a scope holds at most {MAX_PER_SCOPE} secrets"
        )));
    }
    let total: usize = sizes.values().sum();
    if total > MAX_SCOPE_BYTES {
        return Err(too_large(format!(
            "a scope holds at most {MAX_SCOPE_BYTES} bytes of values"
        )));
    }
    Ok(out)
}

/// The key that seals and opens values.
#[derive(Clone)]
pub struct SealingKey(Aes256Gcm);

impl std::fmt::Debug for SealingKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SealingKey(…)")
    }
}

impl SealingKey {
    /// Reads the key from the Worker secret's value; a missing or malformed key is a clear
    /// error (and the value is never echoed).
    pub fn from_config(value: Option<&str>) -> Result<SealingKey, ApiError> {
        let value = value
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| {
                ApiError::new(
                    ErrorCode::Unavailable,
                    format!(
                        "secrets are not configured: set {KEY_VAR} (base64 of 32 random bytes)"
                    ),
                )
            })?;
        let bytes = STANDARD
            .decode(value)
            .map_err(|_| ApiError::internal(format!("{KEY_VAR} is not valid base64")))?;
        if bytes.len() != 32 {
            return Err(ApiError::internal(format!(
                "{KEY_VAR} must decode to 32 bytes, not {}",
                bytes.len()
            )));
        }
        let cipher = Aes256Gcm::new_from_slice(&bytes)
            .map_err(|_| ApiError::internal(format!("{KEY_VAR} is not a valid key")))?;
        Ok(SealingKey(cipher))
    }

    /// Seals a value with the given (random, never reused) IV: base64(IV ‖ ciphertext).
    pub fn seal(&self, iv: [u8; 12], plaintext: &str) -> Result<String, ApiError> {
        let sealed = self
            .0
            .encrypt(Nonce::from_slice(&iv), plaintext.as_bytes())
            .map_err(|_| ApiError::internal("sealing a secret failed"))?;
        let mut out = iv.to_vec();
        out.extend_from_slice(&sealed);
        Ok(STANDARD.encode(out))
    }

    /// Opens a sealed value; a wrong key or altered text is an error, never garbage.
    pub fn open(&self, sealed: &str) -> Result<String, ApiError> {
        let bytes = STANDARD
            .decode(sealed)
            .map_err(|_| ApiError::internal("a stored secret is not base64"))?;
        if bytes.len() < 12 + 16 {
            return Err(ApiError::internal("a stored secret is truncated"));
        }
        let (iv, body) = bytes.split_at(12);
        let plain = self
            .0
            .decrypt(Nonce::from_slice(iv), body)
            .map_err(|_| ApiError::internal("a stored secret does not open with this key"))?;
        String::from_utf8(plain).map_err(|_| ApiError::internal("a stored secret is not UTF-8"))
    }
}

/// One stored secret as read for a sandbox.
#[derive(Debug, Clone)]
pub struct StoredSecret {
    /// `global`, `repository` or `environment`.
    pub scope: String,
    /// For repository secrets: the repository's position in the session (0 = primary);
    /// the primary's value wins over the others'.
    pub order: usize,
    pub name: String,
    pub sealed: String,
    /// For the set-up and start hooks only.
    pub setup: bool,
}

/// A session's secrets, layered: those every process of the sandbox gets, and the
/// set-up-only ones (for the hooks alone).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Layered {
    pub env: BTreeMap<String, String>,
    pub setup: BTreeMap<String, String>,
}

/// Which scopes' secrets reach a session's sandbox, as the seeds define it: a session on an
/// environment gets the global secrets and the environment's (its repositories' own
/// secrets do not flow in); any other session gets the global secrets and each of its
/// repositories' (in order: the primary first, winning collisions).
pub fn flowing_scopes(
    environment_id: Option<&str>,
    repositories: &[(String, String)],
) -> Vec<Scope> {
    let mut scopes = vec![Scope::Global];
    match environment_id {
        Some(id) => scopes.push(Scope::Environment { id: id.to_owned() }),
        None => scopes.extend(repositories.iter().map(|(owner, name)| Scope::Repository {
            owner: owner.clone(),
            name: name.clone(),
        })),
    }
    scopes
}

/// The environment a sandbox gets: every scope's secrets, opened, the narrower scope
/// winning (environment over repository over global; among repositories the primary).
pub fn layer(key: &SealingKey, stored: &[StoredSecret]) -> Result<Layered, ApiError> {
    let mut sorted: Vec<&StoredSecret> = stored.iter().collect();
    // Weakest first, so stronger ones overwrite (a set-up-only one too, and the other way).
    sorted.sort_by(|a, b| {
        Scope::rank(&a.scope)
            .cmp(&Scope::rank(&b.scope))
            .then(b.order.cmp(&a.order))
    });
    let mut out = Layered::default();
    for s in sorted {
        let value = key.open(&s.sealed)?;
        let (into, other) = match s.setup {
            true => (&mut out.setup, &mut out.env),
            false => (&mut out.env, &mut out.setup),
        };
        other.remove(&s.name);
        into.insert(s.name.clone(), value);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SealingKey {
        SealingKey::from_config(Some(&STANDARD.encode([7u8; 32]))).unwrap()
    }

    #[test]
    fn environment_sessions_get_global_and_environment_secrets_only() {
        let repos = vec![
            ("acme".to_owned(), "web".to_owned()),
            ("acme".to_owned(), "api".to_owned()),
        ];
        assert_eq!(
            flowing_scopes(Some("env_1"), &repos),
            vec![Scope::Global, Scope::Environment { id: "env_1".into() }]
        );
        assert_eq!(
            flowing_scopes(None, &repos),
            vec![
                Scope::Global,
                Scope::Repository {
                    owner: "acme".into(),
                    name: "web".into()
                },
                Scope::Repository {
                    owner: "acme".into(),
                    name: "api".into()
                },
            ]
        );
        assert_eq!(flowing_scopes(None, &[]), vec![Scope::Global]);
    }

    #[test]
    fn names_are_checked_and_upper_cased() {
        assert_eq!(normalize_name("api_key").unwrap(), "API_KEY");
        assert_eq!(normalize_name("_X1").unwrap(), "_X1");
        for bad in [
            "",
            "1A",
            "A-B",
            "A B",
            "A=B",
            "A;rm -rf /",
            "Ä",
            "A\nB",
            "a\0",
        ] {
            assert!(normalize_name(bad).is_err(), "{bad:?} accepted");
        }
        assert!(normalize_name(&"A".repeat(257)).is_err());
        for reserved in [
            "path",
            "HOME",
            "INSPECT_SANDBOX_TOKEN",
            "git_askpass",
            "LD_PRELOAD",
            "LD_LIBRARY_PATH",
            "BASH_ENV",
            "ENV",
            "OPENCODE_CONFIG",
        ] {
            let e = normalize_name(reserved).unwrap_err();
            assert!(e.message.contains("reserved"), "{reserved}: {}", e.message);
        }
    }

    #[test]
    fn sealing_round_trips_and_detects_tampering() {
        let k = key();
        let sealed = k.seal([1; 12], "hunter2").unwrap();
        assert!(!sealed.contains("hunter2"));
        assert_eq!(k.open(&sealed).unwrap(), "hunter2");
        // Different IVs, different ciphertexts.
        assert_ne!(sealed, k.seal([2; 12], "hunter2").unwrap());
        let mut raw = STANDARD.decode(&sealed).unwrap();
        let last = raw.len() - 1;
        raw[last] ^= 1;
        assert!(k.open(&STANDARD.encode(raw)).is_err());
        let other = SealingKey::from_config(Some(&STANDARD.encode([8u8; 32]))).unwrap();
        assert!(other.open(&sealed).is_err());
        assert!(k.open("not base64!").is_err());
        assert!(k.open(&STANDARD.encode([0u8; 10])).is_err());
    }

    #[test]
    fn a_known_vector_opens() {
        // AES-256-GCM, key = 32 × 0x07, IV = 12 × 0x01, plaintext "hunter2": computed with
        // Python's `cryptography` package, not with this crate.
        let sealed = "AQEBAQEBAQEBAQEBHpTnw/XN3oM+pEcitGdxPF0hA+ZRa1o=";
        assert_eq!(key().open(sealed).unwrap(), "hunter2");
    }

    #[test]
    fn the_key_must_be_32_bytes_of_base64() {
        assert_eq!(
            SealingKey::from_config(None).unwrap_err().code,
            ErrorCode::Unavailable
        );
        assert!(SealingKey::from_config(Some("  ")).is_err());
        assert!(SealingKey::from_config(Some("%%%")).is_err());
        let e = SealingKey::from_config(Some(&STANDARD.encode([1u8; 16]))).unwrap_err();
        assert!(e.message.contains("32 bytes"));
    }

    fn set(pairs: &[(&str, &str)]) -> SetSecrets {
        SetSecrets {
            secrets: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            setup: vec![],
        }
    }

    #[test]
    fn updates_respect_the_limits() {
        let none = BTreeMap::new();
        assert_eq!(
            plan_update(&none, &set(&[("a", "1")])).unwrap(),
            vec![("A".to_string(), "1".to_string(), false)]
        );
        let mut with_setup = set(&[("a", "1"), ("b", "2")]);
        with_setup.setup = vec!["B".into()];
        assert_eq!(
            plan_update(&none, &with_setup).unwrap(),
            vec![
                ("A".to_string(), "1".to_string(), false),
                ("B".to_string(), "2".to_string(), true)
            ]
        );
        with_setup.setup = vec!["C".into()];
        let e = plan_update(&none, &with_setup).unwrap_err();
        assert!(e.message.contains("not among the secrets sent"), "{e:?}");
        assert!(plan_update(&none, &set(&[])).is_err());
        assert!(plan_update(&none, &set(&[("a", "1"), ("A", "2")])).is_err());
        let big = "x".repeat(MAX_VALUE_BYTES + 1);
        assert_eq!(
            plan_update(&none, &set(&[("A", &big)])).unwrap_err().code,
            ErrorCode::PayloadTooLarge
        );
        let full: BTreeMap<String, usize> = (0..50).map(|i| (format!("S{i}"), 1)).collect();
        assert!(plan_update(&full, &set(&[("NEW", "1")])).is_err());
        // Replacing an existing name does not count twice.
        assert!(plan_update(&full, &set(&[("s1", "2")])).is_ok());
        let heavy: BTreeMap<String, usize> = (0..4).map(|i| (format!("S{i}"), 16 * 1024)).collect();
        assert!(plan_update(&heavy, &set(&[("S0", "small")])).is_ok());
        assert!(plan_update(&heavy, &set(&[("S4", "x")])).is_err());
    }

    #[test]
    fn the_narrower_scope_wins() {
        let k = key();
        let s = |scope: &str, order, name: &str, v: &str| StoredSecret {
            scope: scope.into(),
            order,
            name: name.into(),
            sealed: k.seal([3; 12], v).unwrap(),
            setup: false,
        };
        let layered = layer(
            &k,
            &[
                s("environment", 0, "A", "env"),
                s("repository", 1, "A", "second-repo"),
                s("repository", 0, "B", "primary"),
                s("repository", 1, "B", "second"),
                s("global", 0, "A", "global"),
                s("global", 0, "B", "global"),
                s("global", 0, "C", "global"),
            ],
        )
        .unwrap();
        let env = &layered.env;
        assert_eq!(env["A"], "env");
        assert_eq!(env["B"], "primary");
        assert_eq!(env["C"], "global");
        assert!(layered.setup.is_empty());
        // A set-up-only secret is kept apart; a stronger scope decides what a name is.
        let setup = |scope: &str, name: &str, v: &str| StoredSecret {
            setup: true,
            ..s(scope, 0, name, v)
        };
        let layered = layer(
            &k,
            &[
                setup("global", "TOKEN", "g"),
                s("repository", 0, "TOKEN", "repo"),
                setup("repository", "NPM", "n"),
                s("global", 0, "NPM", "global"),
            ],
        )
        .unwrap();
        assert_eq!(layered.env.get("TOKEN").map(String::as_str), Some("repo"));
        assert!(!layered.setup.contains_key("TOKEN"));
        assert_eq!(layered.setup.get("NPM").map(String::as_str), Some("n"));
        assert!(!layered.env.contains_key("NPM"));
    }
}
