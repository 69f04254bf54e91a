//! Who a linked identity is: a `slack:`/`linear:` actor another service asserts turns into
//! the person it is linked to (`identity_links`), for every door alike — the control
//! plane's bots and signed service callers. Linking itself is `people`.

use crate::auth::links;
use crate::db;
use inspect_protocol::session::Actor;
use inspect_protocol::ApiError;
use serde::Deserialize;
use worker::Env;

#[derive(Deserialize)]
struct PersonRow {
    user_id: String,
    login: Option<String>,
    name: Option<String>,
    email: Option<String>,
    avatar_url: Option<String>,
}

impl PersonRow {
    fn actor(self) -> Actor {
        Actor {
            name: self
                .login
                .or(self.name)
                .unwrap_or_else(|| self.user_id.clone()),
            user_id: self.user_id,
            email: self.email,
            avatar: self.avatar_url,
        }
    }
}

/// The person a linked identity is, or the actor as it came (a guest) when it is not
/// linked. Only identities another service asserts (`slack:`, `linear:`) are looked up.
pub async fn resolve(env: &Env, actor: &Actor) -> Result<Actor, ApiError> {
    if links::provider(&actor.user_id).is_none() {
        return Ok(actor.clone());
    }
    let row: Option<PersonRow> = db::first(
        env,
        "SELECT l.user_id, u.login, u.name, u.email, u.avatar_url
         FROM identity_links l LEFT JOIN users u ON u.id = l.user_id
         WHERE l.identity = ?1",
        &[actor.user_id.as_str().into()],
    )
    .await?;
    Ok(match row {
        Some(person) => {
            let mut resolved = person.actor();
            // A local person has no users row: keep what the service knew of them.
            if resolved.email.is_none() {
                resolved.email = actor.email.clone();
            }
            if resolved.avatar.is_none() {
                resolved.avatar = actor.avatar.clone();
            }
            resolved
        }
        None => actor.clone(),
    })
}
