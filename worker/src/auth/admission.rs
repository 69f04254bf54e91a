//! Who may sign in: allow-lists set as Worker variables. With none set nobody is admitted,
//! unless `ALLOW_EVERYONE` is `true`.

/// The allow-lists, parsed from comma-separated variables (compared without case).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// `ALLOWED_USERS`: GitHub logins.
    pub users: Vec<String>,
    /// `ALLOWED_GITHUB_ORGS`: active membership admits.
    pub orgs: Vec<String>,
    /// `ALLOWED_EMAIL_DOMAINS`: a verified address in one of them admits.
    pub email_domains: Vec<String>,
    /// `ALLOWED_EMAILS`: a verified address on the list admits.
    pub emails: Vec<String>,
    /// `ALLOW_EVERYONE=true`: any GitHub user is admitted.
    pub everyone: bool,
}

/// A comma-separated list of names, compared without case (a leading `@` dropped).
pub fn list(value: Option<&str>) -> Vec<String> {
    value
        .unwrap_or_default()
        .split(',')
        .map(|s| s.trim().trim_start_matches('@').to_ascii_lowercase())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Policy {
    pub fn from_vars(read: impl Fn(&str) -> Option<String>) -> Policy {
        Policy {
            users: list(read("ALLOWED_USERS").as_deref()),
            orgs: list(read("ALLOWED_GITHUB_ORGS").as_deref()),
            email_domains: list(read("ALLOWED_EMAIL_DOMAINS").as_deref()),
            emails: list(read("ALLOWED_EMAILS").as_deref()),
            everyone: read("ALLOW_EVERYONE").as_deref() == Some("true"),
        }
    }

    /// Whether org memberships must be looked up to decide.
    pub fn needs_orgs(&self) -> bool {
        !self.everyone && !self.orgs.is_empty()
    }
}

/// What GitHub told us about the person signing in.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub login: String,
    /// Verified addresses only.
    pub verified_emails: Vec<String>,
    /// Orgs (from the policy's list) where the membership is `active`.
    pub active_orgs: Vec<String>,
}

/// Admitted, or the reason not (safe to show the person).
pub fn admit(policy: &Policy, who: &Identity) -> Result<(), String> {
    if policy.everyone {
        return Ok(());
    }
    let login = who.login.to_ascii_lowercase();
    if policy.users.contains(&login) {
        return Ok(());
    }
    if who
        .active_orgs
        .iter()
        .any(|o| policy.orgs.contains(&o.to_ascii_lowercase()))
    {
        return Ok(());
    }
    for email in &who.verified_emails {
        let email = email.to_ascii_lowercase();
        if policy.emails.contains(&email) {
            return Ok(());
        }
        if let Some((_, domain)) = email.rsplit_once('@') {
            if policy.email_domains.iter().any(|d| d == domain) {
                return Ok(());
            }
        }
    }
    if policy == &Policy::default() {
        return Err("no one is allowed to sign in yet: the operator must set ALLOWED_USERS, ALLOWED_GITHUB_ORGS, ALLOWED_EMAIL_DOMAINS or ALLOW_EVERYONE".into());
    }
    Err(format!(
        "{} is not on this control plane's allow-list",
        who.login
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(login: &str, emails: &[&str], orgs: &[&str]) -> Identity {
        Identity {
            login: login.into(),
            verified_emails: emails.iter().map(|s| s.to_string()).collect(),
            active_orgs: orgs.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn policy(pairs: &[(&str, &str)]) -> Policy {
        Policy::from_vars(|name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn nobody_without_a_list() {
        let p = policy(&[]);
        let e = admit(&p, &who("alice", &["a@x.com"], &[])).unwrap_err();
        assert!(e.contains("ALLOW_EVERYONE"));
        assert!(admit(
            &policy(&[("ALLOW_EVERYONE", "true")]),
            &who("anyone", &[], &[])
        )
        .is_ok());
        assert!(admit(
            &policy(&[("ALLOW_EVERYONE", "yes")]),
            &who("anyone", &[], &[])
        )
        .is_err());
    }

    #[test]
    fn any_list_admits() {
        let p = policy(&[
            ("ALLOWED_USERS", "Alice, bob"),
            ("ALLOWED_GITHUB_ORGS", "acme"),
            ("ALLOWED_EMAIL_DOMAINS", "@example.com"),
            ("ALLOWED_EMAILS", "dan@other.org"),
        ]);
        assert!(p.needs_orgs());
        assert!(admit(&p, &who("alice", &[], &[])).is_ok());
        assert!(admit(&p, &who("BOB", &[], &[])).is_ok());
        assert!(admit(&p, &who("carol", &[], &["ACME"])).is_ok());
        assert!(admit(&p, &who("erin", &["erin@Example.com"], &[])).is_ok());
        assert!(admit(&p, &who("dan", &["dan@other.org"], &[])).is_ok());
        assert!(admit(&p, &who("mallory", &["m@evil.example.com"], &["evil"])).is_err());
        assert!(admit(&p, &who("mallory", &["m@example.com.evil"], &[])).is_err());
    }
}
