//! Who is an admin: named by `ADMIN_USERS` (GitHub logins or verified addresses), given in
//! the app by another admin, or — while nobody is named at all — everyone signed in, as
//! before roles existed. Pure: the facts in, the role and where it came from out.

use inspect_protocol::people::{Role, RoleSource};

/// `ADMIN_USERS`: comma-separated GitHub logins and addresses, compared without case.
pub fn admin_list(value: Option<&str>) -> Vec<String> {
    super::admission::list(value)
}

/// What decides a signed-in person's role.
#[derive(Debug, Clone, Default)]
pub struct RoleFacts<'a> {
    /// The person at this machine in local mode.
    pub local: bool,
    /// A service acting for someone (a bot): never an admin.
    pub service: bool,
    /// Their GitHub login (the sign-in's name).
    pub login: &'a str,
    /// Their verified addresses.
    pub emails: &'a [String],
    /// `ADMIN_USERS`, parsed.
    pub named: &'a [String],
    /// The role an admin gave them in the app.
    pub given: Option<Role>,
    /// Whether anyone holds an admin role given in the app.
    pub admins_given: bool,
}

pub fn decide(f: &RoleFacts) -> (Role, RoleSource) {
    if f.local {
        return (Role::Admin, RoleSource::Local);
    }
    if f.service {
        return (Role::Member, RoleSource::Default);
    }
    let login = f.login.to_ascii_lowercase();
    let named = (!login.is_empty() && f.named.contains(&login))
        || f.emails
            .iter()
            .any(|e| f.named.contains(&e.to_ascii_lowercase()));
    if named {
        return (Role::Admin, RoleSource::Setting);
    }
    if let Some(role) = f.given {
        return (role, RoleSource::App);
    }
    if f.named.is_empty() && !f.admins_given {
        return (Role::Admin, RoleSource::Unset);
    }
    (Role::Member, RoleSource::Default)
}

/// The member's refusal, naming what they tried to change.
pub fn refusal(what: &str) -> String {
    format!(
        "changing {what} is for admins; you are a member (an admin gives roles in Settings › People, or names admins in ADMIN_USERS)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_admins_given_roles_and_the_unset_deployment() {
        let named = admin_list(Some(" Alice, @bob ,carol@corp.example,"));
        assert_eq!(named, ["alice", "bob", "carol@corp.example"]);
        let emails = vec!["Carol@Corp.Example".to_owned()];
        let role = |login: &str, emails: &[String], given, admins_given, named: &[String]| {
            decide(&RoleFacts {
                login,
                emails,
                named,
                given,
                admins_given,
                ..Default::default()
            })
        };
        assert_eq!(
            role("ALICE", &[], None, false, &named),
            (Role::Admin, RoleSource::Setting)
        );
        assert_eq!(
            role("carol", &emails, Some(Role::Member), true, &named),
            (Role::Admin, RoleSource::Setting),
            "the setting wins over the app"
        );
        assert_eq!(
            role("dave", &[], None, false, &named),
            (Role::Member, RoleSource::Default)
        );
        assert_eq!(
            role("dave", &[], Some(Role::Admin), true, &named),
            (Role::Admin, RoleSource::App)
        );
        // Nobody named anywhere: everyone is an admin, as before roles.
        assert_eq!(
            role("dave", &[], None, false, &[]),
            (Role::Admin, RoleSource::Unset)
        );
        // Once an admin is given in the app, the rest are members.
        assert_eq!(
            role("dave", &[], None, true, &[]),
            (Role::Member, RoleSource::Default)
        );
        assert_eq!(
            decide(&RoleFacts {
                local: true,
                ..Default::default()
            }),
            (Role::Admin, RoleSource::Local)
        );
        assert_eq!(
            decide(&RoleFacts {
                service: true,
                login: "alice",
                named: &named,
                ..Default::default()
            }),
            (Role::Member, RoleSource::Default)
        );
    }
}
