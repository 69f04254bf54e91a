//! Wire types of people: the identities a person is known by (linked from Slack or
//! Linear, proven both ways or by equal verified addresses) and their role in the
//! deployment.

use serde::{Deserialize, Serialize};

/// What a person may change: `admin`s change what the whole deployment shares (models,
/// grants, MCP servers, skills, secrets, environments, repositories, integrations, images,
/// others' automations, roles); `member`s their own tokens, profiles, automations and
/// sessions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Member,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Member => "member",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "admin" => Some(Role::Admin),
            "member" => Some(Role::Member),
            _ => None,
        }
    }
}

/// Where a person's role comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum RoleSource {
    /// `ADMIN_USERS` names them (changed only there).
    Setting,
    /// Given in the app by an admin.
    App,
    /// Nobody is named admin yet: every signed-in person is one, as before roles.
    Unset,
    /// The default for everyone else.
    Default,
    /// Local mode: the person at this machine.
    Local,
}

/// How an identity came to be linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum LinkRule {
    /// A one-time code sent to the identity, opened by the signed-in person.
    Code,
    /// The service's verified address equals one of the person's verified addresses.
    Email,
}

impl LinkRule {
    pub fn as_str(self) -> &'static str {
        match self {
            LinkRule::Code => "code",
            LinkRule::Email => "email",
        }
    }
}

/// One identity of a person's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LinkedIdentity {
    /// `slack:U123`, `linear:<id>`.
    pub identity: String,
    /// `slack`, `linear`.
    pub provider: String,
    /// As that service names them.
    pub name: String,
    pub rule: LinkRule,
    pub linked_at: i64,
}

/// `GET /auth/identities`: who the caller signs in as, and what is linked to them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Identities {
    /// The identity they sign in with (`github:<id>`, or `local`).
    pub sign_in: String,
    pub linked: Vec<LinkedIdentity>,
}

/// `POST /auth/identities/link`: the code a bot sent to the identity to be linked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinkRequest {
    pub code: String,
}

/// A person as an admin sees them (`GET /people`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Person {
    pub user_id: String,
    pub name: String,
    pub email: Option<String>,
    pub avatar: Option<String>,
    pub role: Role,
    pub role_source: RoleSource,
    /// Identities linked to them (`slack:U123`, …).
    pub linked: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct People {
    pub people: Vec<Person>,
}

/// `PUT /people/:userId/role`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SetRole {
    pub role: Role,
}

/// `GET /auth/providers`: the sign-ins a deployment offers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SignInProviders {
    pub github: bool,
    pub google: bool,
}

/// Minutes a link code stays good.
pub const LINK_CODE_TTL_MS: i64 = 10 * 60 * 1000;
