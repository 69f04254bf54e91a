//! One person across every door: the identities linked to a person (`identity_links`),
//! the one-time codes that prove a link both ways, the email rule, and roles (`ADMIN_USERS`
//! and `user_roles`). The pure rules are in `auth::roles` and `auth::links`.

use crate::auth::links;
use crate::auth::roles::{self, RoleFacts};
use crate::auth::tokens;
use crate::caller::{Caller, Via};
use crate::db::{self, num, setting};
use inspect_protocol::people::{
    Identities, LinkRule, LinkedIdentity, People, Person, Role, RoleSource, LINK_CODE_TTL_MS,
};
use inspect_protocol::{ApiError, ErrorCode};
use serde::Deserialize;
use worker::Env;

/// A one-time code for `identity` (what the bot sends the person there, privately): the
/// path of the page that links it, on this deployment.
pub async fn link_code(
    env: &Env,
    identity: &str,
    display_name: &str,
    now: i64,
) -> Result<String, ApiError> {
    links::provider(identity)
        .ok_or_else(|| ApiError::bad_request(format!("{identity} cannot be linked")))?;
    let code = hex::encode(db::random::<16>()?);
    db::sweep_then_run(
        env,
        ("DELETE FROM link_codes WHERE expires_at <= ?1", &[num(now)]),
        (
            "INSERT INTO link_codes (code_hash, identity, display_name, created_at, expires_at) VALUES (?1, ?2, ?3, ?4, ?5)",
            &[
                tokens::hash(&code).into(),
                identity.into(),
                links::display_name(display_name).into(),
                num(now),
                num(now + LINK_CODE_TTL_MS),
            ],
        ),
    )
    .await?;
    Ok(format!("/settings/account?link={code}"))
}

/// The email rule: links `identity` to the one person whose verified addresses include
/// `email`, when the service says the address is verified and the identity is not linked
/// yet. Whom it was linked to, if anyone.
pub async fn link_by_email(
    env: &Env,
    identity: &str,
    display_name: &str,
    email: &str,
    now: i64,
) -> Result<Option<String>, ApiError> {
    if links::provider(identity).is_none() {
        return Ok(None);
    }
    let email = email.trim().to_ascii_lowercase();
    if !email.contains('@') {
        return Ok(None);
    }
    #[derive(Deserialize)]
    struct Owner {
        user_id: String,
    }
    let owners: Vec<Owner> = db::all(
        env,
        "SELECT DISTINCT user_id FROM user_emails WHERE email = ?1 AND user_id != ?2 LIMIT 2",
        &[email.as_str().into(), identity.into()],
    )
    .await?;
    // Two people claiming one address decide nothing.
    let [owner] = owners.as_slice() else {
        return Ok(None);
    };
    let linked = db::run(
        env,
        "INSERT INTO identity_links (identity, user_id, display_name, rule, linked_at) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(identity) DO NOTHING",
        &[
            identity.into(),
            owner.user_id.as_str().into(),
            links::display_name(display_name).into(),
            LinkRule::Email.as_str().into(),
            num(now),
        ],
    )
    .await?;
    if linked == 1 {
        inspect_runtime::log::emit(
            inspect_runtime::log::LogLine::info("people", "linked")
                .actor(&owner.user_id)
                .with("identity", identity)
                .with("rule", "email"),
        );
    }
    Ok((linked == 1).then(|| owner.user_id.clone()))
}

/// Keeps the verified addresses a sign-in reported (the email rule links on these).
pub async fn remember_emails(env: &Env, user_id: &str, emails: &[String]) -> Result<(), ApiError> {
    db::run(
        env,
        "DELETE FROM user_emails WHERE user_id = ?1",
        &[user_id.into()],
    )
    .await?;
    for email in emails.iter().take(links::MAX_EMAILS) {
        db::run(
            env,
            "INSERT OR IGNORE INTO user_emails (user_id, email) VALUES (?1, ?2)",
            &[user_id.into(), email.to_ascii_lowercase().into()],
        )
        .await?;
    }
    Ok(())
}

fn signed_in_person(caller: &Caller) -> Result<(), ApiError> {
    if caller.is_person() {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorCode::Forbidden,
            "identities are linked by a signed-in person at a browser, not with a token or a service",
        ))
    }
}

#[derive(Deserialize)]
struct LinkRow {
    identity: String,
    display_name: String,
    rule: String,
    linked_at: f64,
}

impl LinkRow {
    fn into_wire(self) -> LinkedIdentity {
        LinkedIdentity {
            provider: links::provider(&self.identity)
                .unwrap_or("other")
                .to_owned(),
            identity: self.identity,
            name: self.display_name,
            rule: if self.rule == "email" {
                LinkRule::Email
            } else {
                LinkRule::Code
            },
            linked_at: self.linked_at as i64,
        }
    }
}

/// `GET /auth/identities`.
pub async fn identities(env: &Env, caller: &Caller) -> Result<Identities, ApiError> {
    let rows: Vec<LinkRow> = db::all(
        env,
        "SELECT identity, display_name, rule, linked_at FROM identity_links WHERE user_id = ?1 ORDER BY linked_at",
        &[caller.actor.user_id.as_str().into()],
    )
    .await?;
    Ok(Identities {
        sign_in: caller.actor.user_id.clone(),
        linked: rows.into_iter().map(LinkRow::into_wire).collect(),
    })
}

/// `POST /auth/identities/link {code}`: the signed-in person takes the identity the code
/// was sent to. Single use; refused when expired, already used, or when the identity is
/// someone else's.
pub async fn link(
    env: &Env,
    caller: &Caller,
    code: &str,
    now: i64,
) -> Result<LinkedIdentity, ApiError> {
    signed_in_person(caller)?;
    let code = code.trim();
    if !links::plausible_code(code) {
        return Err(ApiError::bad_request(
            "that is not a link code (ask the bot for one: /inspect link)",
        ));
    }
    #[derive(Deserialize)]
    struct CodeRow {
        identity: String,
        display_name: String,
        expires_at: f64,
    }
    // Single use: the row goes as it is read, expired or not.
    let row: Option<CodeRow> = db::first(
        env,
        "DELETE FROM link_codes WHERE code_hash = ?1 RETURNING identity, display_name, expires_at",
        &[tokens::hash(code).into()],
    )
    .await?;
    let row = row.ok_or_else(|| {
        ApiError::bad_request(
            "this link code is unknown or was already used; ask the bot for a new one",
        )
    })?;
    if row.expires_at as i64 <= now {
        return Err(ApiError::bad_request(
            "this link code expired (codes last 10 minutes); ask the bot for a new one",
        ));
    }
    let me = caller.actor.user_id.as_str();
    db::run(
        env,
        "INSERT INTO identity_links (identity, user_id, display_name, rule, linked_at) VALUES (?1, ?2, ?3, 'code', ?4)
         ON CONFLICT(identity) DO NOTHING",
        &[
            row.identity.as_str().into(),
            me.into(),
            row.display_name.as_str().into(),
            num(now),
        ],
    )
    .await?;
    let held: Option<LinkRow> = db::first(
        env,
        "SELECT identity, display_name, rule, linked_at FROM identity_links WHERE identity = ?1 AND user_id = ?2",
        &[row.identity.as_str().into(), me.into()],
    )
    .await?;
    let held = held.ok_or_else(|| {
        ApiError::conflict(format!(
            "{} is already linked to another person; they must unlink it first",
            row.identity
        ))
    })?;
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("people", "linked")
            .actor(me)
            .with("identity", row.identity.as_str())
            .with("rule", "code"),
    );
    Ok(held.into_wire())
}

/// `DELETE /auth/identities/:identity`: only the person's own. Sessions stay with whoever
/// made them.
pub async fn unlink(env: &Env, caller: &Caller, identity: &str) -> Result<(), ApiError> {
    signed_in_person(caller)?;
    let gone = db::run(
        env,
        "DELETE FROM identity_links WHERE identity = ?1 AND user_id = ?2",
        &[identity.into(), caller.actor.user_id.as_str().into()],
    )
    .await?;
    if gone == 0 {
        return Err(ApiError::not_found(format!(
            "{identity} is not linked to you"
        )));
    }
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("people", "unlinked")
            .actor(&caller.actor.user_id)
            .with("identity", identity),
    );
    Ok(())
}

#[derive(Deserialize)]
struct RoleRow {
    given: Option<String>,
    admins_given: f64,
    emails: Option<String>,
}

async fn role_facts(env: &Env, user_id: &str) -> Result<RoleRow, ApiError> {
    let row: Option<RoleRow> = db::first(
        env,
        "SELECT (SELECT role FROM user_roles WHERE user_id = ?1) AS given,
                EXISTS (SELECT 1 FROM user_roles WHERE role = 'admin') AS admins_given,
                (SELECT group_concat(email, ' ') FROM user_emails WHERE user_id = ?1) AS emails",
        &[user_id.into()],
    )
    .await?;
    row.ok_or_else(|| ApiError::internal("the role query returned nothing"))
}

fn decide(
    caller_local: bool,
    service: bool,
    login: &str,
    row: &RoleRow,
    env: &Env,
) -> (Role, RoleSource) {
    let named = roles::admin_list(setting(env, "ADMIN_USERS").as_deref());
    let emails: Vec<String> = row
        .emails
        .as_deref()
        .unwrap_or_default()
        .split(' ')
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    roles::decide(&RoleFacts {
        local: caller_local,
        service,
        login,
        emails: &emails,
        named: &named,
        given: row.given.as_deref().and_then(Role::parse),
        admins_given: row.admins_given > 0.0,
    })
}

/// The caller's role, and where it comes from.
pub async fn role_of(env: &Env, caller: &Caller) -> Result<(Role, RoleSource), ApiError> {
    match caller.via {
        Via::Local => return Ok((Role::Admin, RoleSource::Local)),
        Via::Service { .. } => return Ok((Role::Member, RoleSource::Default)),
        Via::Browser { .. } | Via::ApiToken => {}
    }
    let row = role_facts(env, &caller.actor.user_id).await?;
    Ok(decide(false, false, &caller.actor.name, &row, env))
}

/// Refuses a member what only admins may change (`what`, for the message).
pub async fn require_admin(env: &Env, caller: &Caller, what: &str) -> Result<(), ApiError> {
    match role_of(env, caller).await? {
        (Role::Admin, _) => Ok(()),
        (Role::Member, _) => Err(ApiError::new(ErrorCode::Forbidden, roles::refusal(what))),
    }
}

/// `GET /people` (admins): everyone who signed in, with roles and linked identities.
pub async fn list(env: &Env) -> Result<People, ApiError> {
    #[derive(Deserialize)]
    struct Row {
        id: String,
        login: String,
        name: Option<String>,
        email: Option<String>,
        avatar_url: Option<String>,
        given: Option<String>,
        emails: Option<String>,
        linked: Option<String>,
    }
    let rows: Vec<Row> = db::all(
        env,
        "SELECT u.id, u.login, u.name, u.email, u.avatar_url,
                (SELECT role FROM user_roles r WHERE r.user_id = u.id) AS given,
                (SELECT group_concat(email, ' ') FROM user_emails e WHERE e.user_id = u.id) AS emails,
                (SELECT group_concat(identity, ' ') FROM identity_links l WHERE l.user_id = u.id) AS linked
         FROM users u ORDER BY u.login LIMIT 1000",
        &[],
    )
    .await?;
    let admins_given = rows.iter().any(|r| r.given.as_deref() == Some("admin"));
    let people = rows
        .into_iter()
        .map(|r| {
            let facts = RoleRow {
                given: r.given.clone(),
                admins_given: if admins_given { 1.0 } else { 0.0 },
                emails: r.emails.clone(),
            };
            let (role, role_source) = decide(false, false, &r.login, &facts, env);
            Person {
                user_id: r.id,
                name: r.name.unwrap_or_else(|| r.login.clone()),
                email: r.email,
                avatar: r.avatar_url,
                role,
                role_source,
                linked: r
                    .linked
                    .unwrap_or_default()
                    .split(' ')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect(),
            }
        })
        .collect();
    Ok(People { people })
}

/// `PUT /people/:userId/role` (admins). A role `ADMIN_USERS` gives is changed only there;
/// the last admin is not made a member.
pub async fn set_role(
    env: &Env,
    caller: &Caller,
    user_id: &str,
    role: Role,
    now: i64,
) -> Result<Person, ApiError> {
    let everyone = list(env).await?;
    let person = everyone
        .people
        .iter()
        .find(|p| p.user_id == user_id)
        .cloned()
        .ok_or_else(|| ApiError::not_found(format!("nobody {user_id} has signed in here")))?;
    if person.role_source == RoleSource::Setting && role == Role::Member {
        return Err(ApiError::conflict(format!(
            "{} is an admin by ADMIN_USERS; change the setting to change that",
            person.name
        )));
    }
    let admins = everyone
        .people
        .iter()
        .filter(|p| p.role == Role::Admin && p.role_source != RoleSource::Unset)
        .count();
    if role == Role::Member
        && person.role == Role::Admin
        && admins <= 1
        && person.role_source != RoleSource::Unset
    {
        return Err(ApiError::conflict(
            "this is the last admin; make someone else an admin first",
        ));
    }
    db::run(
        env,
        "INSERT INTO user_roles (user_id, role, updated_by, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(user_id) DO UPDATE SET role = excluded.role, updated_by = excluded.updated_by, updated_at = excluded.updated_at",
        &[
            user_id.into(),
            role.as_str().into(),
            caller.actor.user_id.as_str().into(),
            num(now),
        ],
    )
    .await?;
    inspect_runtime::log::emit(
        inspect_runtime::log::LogLine::info("people", "role_set")
            .actor(&caller.actor.user_id)
            .with("user", user_id)
            .with("role", role.as_str()),
    );
    let after = list(env).await?;
    after
        .people
        .into_iter()
        .find(|p| p.user_id == user_id)
        .ok_or_else(|| ApiError::internal("the person went away"))
}

/// The person a Google sign-in is: whoever `google:<sub>` is linked to; else the one person
/// whose verified addresses include Google's verified address (linked now, by the email
/// rule); else a person of its own, `google:<sub>`.
pub async fn google_person(
    env: &Env,
    who: &crate::auth::oidc::Verified,
    now: i64,
) -> Result<String, ApiError> {
    let identity = format!("google:{}", who.sub);
    #[derive(Deserialize)]
    struct Owner {
        user_id: String,
    }
    let linked: Option<Owner> = db::first(
        env,
        "SELECT user_id FROM identity_links WHERE identity = ?1",
        &[identity.as_str().into()],
    )
    .await?;
    if let Some(owner) = linked {
        return Ok(owner.user_id);
    }
    let name = who.name.clone().unwrap_or_else(|| who.email.clone());
    if let Some(owner) = link_by_email(env, &identity, &name, &who.email, now).await? {
        return Ok(owner);
    }
    db::run(
        env,
        "INSERT INTO users (id, login, name, email, avatar_url, created_at, last_sign_in_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)
         ON CONFLICT(id) DO UPDATE SET name = excluded.name, email = excluded.email, avatar_url = excluded.avatar_url, last_sign_in_at = excluded.last_sign_in_at",
        &[
            identity.as_str().into(),
            who.email.as_str().into(),
            name.as_str().into(),
            who.email.as_str().into(),
            db::opt(who.picture.as_deref()),
            num(now),
        ],
    )
    .await?;
    remember_emails(env, &identity, std::slice::from_ref(&who.email)).await?;
    Ok(identity)
}
