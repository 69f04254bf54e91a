//! A fake Linear written from Linear's published GraphQL schema (`packages/sdk/src/
//! schema.graphql` in `linear/linear`) and its agent, webhook and OAuth documentation.
//!
//! - `POST /graphql`: a bearer token the token endpoint issued (else HTTP 401 with an
//!   `AUTHENTICATION_ERROR`); the document is parsed and **validated** against the part of
//!   Linear's schema below, transcribed for the operations the agent reference lists
//!   (fields, arguments, required arguments, variable types as declared, input objects'
//!   fields and enums), so a misspelt field, an unknown argument or a mistyped variable is
//!   refused as Linear refuses it; anything outside that part is refused too. Answers
//!   carry only the fields asked for. Agent activities follow Linear's rules: a known
//!   agent session, the content's type and its fields, ephemeral only for thoughts and
//!   actions. Everything accepted is recorded for the test.
//! - `POST /oauth/token`: form-encoded `authorization_code` (the code given by the
//!   authorize page, with the same `redirect_uri`) and `client_credentials`, with the
//!   app's id and secret; `{access_token, token_type, expires_in, scope}`.
//! - `GET /oauth/authorize`: the person approves at once: a redirect to `redirect_uri`
//!   with a code and the `state` given (which must be there, as must `actor=app`).
//! - The test side signs deliveries as Linear does (`Linear-Signature`: hex HMAC-SHA256
//!   of the body; `Linear-Delivery`; `webhookTimestamp` in the body).

use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use graphql_parser::query as q;
use graphql_parser::schema as s;
use hmac::{Hmac, Mac};
use serde_json::{json, Map, Value};
use sha2::Sha256;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub const CLIENT_ID: &str = "fake-linear-client";
pub const CLIENT_SECRET: &str = "fake-linear-client-secret";
pub const WEBHOOK_SECRET: &str = "fake-linear-webhook-secret";
pub const ORGANIZATION: &str = "org-acme";
pub const APP_USER: &str = "app-user-agent";

/// The part of Linear's schema the bot may use, transcribed (names, arguments and types as
/// Linear publishes them; descriptions left out).
const SCHEMA: &str = r#"
scalar DateTime
scalar JSONObject
scalar JSON
schema { query: Query mutation: Mutation }
type Query {
  issue(id: String!): Issue!
  user(id: String!): User!
  viewer: User!
  team(id: String!): Team!
  issueRepositorySuggestions(agentSessionId: String, candidateRepositories: [CandidateRepository!]!, issueId: String!): RepositorySuggestionsPayload!
}
type Mutation {
  agentActivityCreate(input: AgentActivityCreateInput!): AgentActivityPayload!
  agentSessionUpdate(id: String!, input: AgentSessionUpdateInput!): AgentSessionPayload!
  issueUpdate(id: String!, input: IssueUpdateInput!): IssuePayload!
}
enum PaginationOrderBy { createdAt updatedAt }
enum AgentActivitySignal { auth continue select stop }
type Organization { id: ID! name: String! urlKey: String! }
type User { id: ID! name: String! displayName: String! email: String! organization: Organization! }
type WorkflowState { id: ID! name: String! type: String! position: Float! team: Team! }
type WorkflowStateConnection { nodes: [WorkflowState!]! }
input StringComparator { eq: String neq: String in: [String!] nin: [String!] }
input WorkflowStateFilter { type: StringComparator name: StringComparator and: [WorkflowStateFilter!] or: [WorkflowStateFilter!] }
type Team {
  id: ID! key: String! name: String!
  states(after: String, before: String, filter: WorkflowStateFilter, first: Int, includeArchived: Boolean, last: Int, orderBy: PaginationOrderBy): WorkflowStateConnection!
}
type Project { id: ID! name: String! url: String! }
type IssueLabel { id: ID! name: String! }
type IssueLabelConnection { nodes: [IssueLabel!]! }
type Comment { id: ID! body: String! createdAt: DateTime! user: User url: String! }
type CommentConnection { nodes: [Comment!]! }
type Issue {
  id: ID! identifier: String! title: String! description: String url: String! priority: Float!
  state: WorkflowState! team: Team! project: Project assignee: User
  labels(after: String, before: String, first: Int, includeArchived: Boolean, last: Int, orderBy: PaginationOrderBy): IssueLabelConnection!
  comments(after: String, before: String, first: Int, includeArchived: Boolean, last: Int, orderBy: PaginationOrderBy): CommentConnection!
}
type AgentActivity { id: ID! ephemeral: Boolean! signal: AgentActivitySignal }
type AgentActivityPayload { agentActivity: AgentActivity! lastSyncId: Float! success: Boolean! }
type AgentSession { id: ID! status: String! }
type AgentSessionPayload { agentSession: AgentSession! lastSyncId: Float! success: Boolean! }
type IssuePayload { issue: Issue lastSyncId: Float! success: Boolean! }
type RepositorySuggestion { confidence: Float! hostname: String repositoryFullName: String! }
type RepositorySuggestionsPayload { suggestions: [RepositorySuggestion!]! }
input CandidateRepository { hostname: String! repositoryFullName: String! }
input AgentActivityCreateInput { agentSessionId: String! content: JSONObject! ephemeral: Boolean id: String signal: AgentActivitySignal signalMetadata: JSONObject }
input AgentSessionExternalUrlInput { label: String! url: String! }
input AgentSessionUpdateInput { addedExternalUrls: [AgentSessionExternalUrlInput!] externalLink: String externalUrls: [AgentSessionExternalUrlInput!] plan: JSONObject removedExternalUrls: [String!] }
input IssueUpdateInput { assigneeId: String delegateId: String description: String stateId: String title: String labelIds: [String!] }
"#;

/// An activity the bot created, as Linear keeps it.
#[derive(Debug, Clone)]
pub struct Activity {
    pub agent_session: String,
    pub content: Value,
    pub ephemeral: bool,
    /// When it arrived (ms since the fake started).
    pub at_ms: u128,
}

impl Activity {
    pub fn kind(&self) -> &str {
        self.content["type"].as_str().unwrap_or("")
    }

    pub fn body(&self) -> String {
        self.content["body"].as_str().unwrap_or("").to_owned()
    }
}

#[derive(Default)]
struct World {
    base_url: String,
    started: Option<std::time::Instant>,
    /// token → expires (unix ms)
    tokens: HashMap<String, i64>,
    /// token → the workspace it acts in (the installed one unless said otherwise).
    token_org: HashMap<String, String>,
    /// The workspace the next client-credentials tokens act in (an app installed in
    /// several workspaces); `None`: the installed one.
    mint_org: Option<String>,
    /// The workspace of the request being answered.
    caller_org: String,
    /// Fields asked with a token of another workspace (which sees none of this one).
    foreign_calls: Vec<String>,
    tokens_issued: usize,
    /// Every token ever issued (to look for them where they must not be).
    all_tokens: Vec<String>,
    codes: HashMap<String, String>,
    issues: HashMap<String, Value>,
    teams: HashMap<String, Value>,
    users: HashMap<String, Value>,
    agent_sessions: HashMap<String, Value>,
    suggestions: HashMap<String, Vec<(String, f64)>>,
    activities: Vec<Activity>,
    session_updates: Vec<(String, Value)>,
    issue_updates: Vec<(String, Value)>,
    /// Every operation's root fields, in order; refused ones as `refused: …`.
    calls: Vec<String>,
    clock: u64,
}

type Shared = Arc<Mutex<World>>;

pub struct FakeLinear {
    pub base_url: String,
    world: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeLinear {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl FakeLinear {
    pub async fn start() -> anyhow::Result<FakeLinear> {
        // The transcription must itself be a schema.
        s::parse_schema::<String>(SCHEMA).map_err(|e| anyhow::anyhow!("schema: {e}"))?;
        let world: Shared = Arc::default();
        let app = Router::new()
            .route("/graphql", post(graphql))
            .route("/oauth/token", post(token))
            .route("/oauth/authorize", get(authorize))
            .with_state(world.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        {
            let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
            w.base_url = format!("http://{addr}");
            w.started = Some(std::time::Instant::now());
            w.users.insert(
                APP_USER.into(),
                json!({"id": APP_USER, "name": "Inspect", "displayName": "inspect", "email": "agent@acme.test"}),
            );
        }
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(FakeLinear {
            base_url: format!("http://{addr}"),
            world,
            task,
        })
    }

    /// The Worker's settings that point the bot here.
    pub fn worker_vars(&self) -> Vec<(String, String)> {
        vec![
            ("LINEAR_CLIENT_ID".into(), CLIENT_ID.into()),
            ("LINEAR_CLIENT_SECRET".into(), CLIENT_SECRET.into()),
            ("LINEAR_WEBHOOK_SECRET".into(), WEBHOOK_SECRET.into()),
            ("LINEAR_API_URL".into(), self.base_url.clone()),
            (
                "LINEAR_AUTHORIZE_URL".into(),
                format!("{}/oauth/authorize", self.base_url),
            ),
        ]
    }

    fn with<T>(&self, f: impl FnOnce(&mut World) -> T) -> T {
        let mut w = self.world.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut w)
    }

    pub fn add_user(&self, id: &str, name: &str, email: &str) {
        self.with(|w| {
            w.users.insert(
                id.into(),
                json!({"id": id, "name": name, "displayName": name.to_lowercase(), "email": email}),
            )
        });
    }

    /// A team with its workflow states `(id, name, type, position)`.
    pub fn add_team(&self, id: &str, key: &str, name: &str, states: &[(&str, &str, &str, f64)]) {
        let states: Vec<Value> = states
            .iter()
            .map(|(sid, sname, kind, pos)| {
                json!({"id": sid, "name": sname, "type": kind, "position": pos})
            })
            .collect();
        self.with(|w| {
            w.teams.insert(
                id.into(),
                json!({"id": id, "key": key, "name": name, "states": {"nodes": states}}),
            )
        });
    }

    /// An issue of `team` in the state `state` (an id among the team's).
    #[allow(clippy::too_many_arguments)]
    pub fn add_issue(
        &self,
        id: &str,
        identifier: &str,
        title: &str,
        description: &str,
        team: &str,
        state: &str,
        labels: &[&str],
        comments: &[(&str, &str)],
    ) {
        self.with(|w| {
            let base = w.base_url.clone();
            let comments: Vec<Value> = comments
                .iter()
                .enumerate()
                .map(|(n, (who, body))| {
                    json!({"id": format!("c{n}"), "body": body, "createdAt": format!("2026-12-01T00:00:{n:02}Z"),
                           "user": {"id": who, "name": who}, "url": format!("{base}/c{n}")})
                })
                .collect();
            w.issues.insert(
                id.into(),
                json!({"id": id, "identifier": identifier, "title": title, "description": description,
                       "url": format!("{base}/acme/issue/{identifier}"), "priority": 2.0,
                       "team": team, "state": state, "project": null, "assignee": null,
                       "labels": {"nodes": labels.iter().map(|l| json!({"id": format!("l-{l}"), "name": l})).collect::<Vec<_>>()},
                       "comments": {"nodes": comments}}),
            )
        });
    }

    pub fn suggest(&self, issue: &str, suggestions: &[(&str, f64)]) {
        self.with(|w| {
            w.suggestions.insert(
                issue.into(),
                suggestions
                    .iter()
                    .map(|(r, c)| (r.to_string(), *c))
                    .collect(),
            )
        });
    }

    /// An agent session Linear made on `issue` (what a `created` event announces).
    pub fn open_agent_session(&self, id: &str, issue: &str) {
        self.with(|w| {
            w.agent_sessions.insert(
                id.into(),
                json!({"id": id, "issue": issue, "status": "pending"}),
            )
        });
    }

    /// An `AgentSessionEvent` as Linear sends it (the payload only; [`signed`] signs it).
    pub fn event(
        &self,
        action: &str,
        agent_session: &str,
        issue: &str,
        creator: &str,
        comment: Option<&str>,
        activity: Option<Value>,
    ) -> Value {
        let (identifier, title, url) = self.with(|w| {
            let i = w.issues.get(issue).cloned().unwrap_or(Value::Null);
            (
                i["identifier"].clone(),
                i["title"].clone(),
                i["url"].clone(),
            )
        });
        let mut e = json!({
            "type": "AgentSessionEvent",
            "action": action,
            "createdAt": "2026-12-04T12:00:00.000Z",
            "organizationId": ORGANIZATION,
            "oauthClientId": CLIENT_ID,
            "appUserId": APP_USER,
            "webhookId": "webhook-1",
            "webhookTimestamp": now_ms(),
            "agentSession": {
                "id": agent_session, "appUserId": APP_USER, "organizationId": ORGANIZATION,
                "creatorId": creator, "issueId": issue, "status": "pending", "type": "commentThread",
                "createdAt": "2026-12-04T12:00:00.000Z", "updatedAt": "2026-12-04T12:00:00.000Z",
                "issue": {"id": issue, "identifier": identifier, "title": title, "url": url,
                          "teamId": "team-eng"},
                "comment": comment.map(|c| json!({"id": "root-comment", "body": c, "userId": creator})),
            },
            "promptContext": format!("<issue identifier=\"{}\"><title>{}</title></issue>", identifier.as_str().unwrap_or(""), title.as_str().unwrap_or("")),
            // As Linear sends them on an issue without comments and a workspace without
            // guidance: `null`, not an empty list (the schema's `[Comment!]` is nullable).
            "previousComments": null,
            "guidance": null,
        });
        if let Some(a) = activity {
            e["agentActivity"] = a;
        }
        e
    }

    /// An `Issue` data-change event as Linear sends it (`create`, or `update` with
    /// `updatedFrom`), from the issue as the fake keeps it.
    pub fn issue_event(&self, action: &str, issue: &str, updated_from: Option<Value>) -> Value {
        let view = self.with(|w| issue_view(w, issue)).unwrap_or(Value::Null);
        let mut data = json!({
            "id": view["id"], "identifier": view["identifier"], "title": view["title"],
            "description": view["description"], "priority": view["priority"],
            "teamId": view["team"]["id"], "team": view["team"],
            "stateId": view["state"]["id"], "state": {"id": view["state"]["id"], "name": view["state"]["name"], "type": view["state"]["type"], "color": "#e2e2e2"},
            "labelIds": view["labels"]["nodes"].as_array().map(|l| l.iter().map(|x| x["id"].clone()).collect::<Vec<_>>()),
            "labels": view["labels"]["nodes"],
            "createdAt": "2026-12-04T12:00:00.000Z", "updatedAt": "2026-12-04T12:00:00.000Z",
        });
        if data["labels"].is_null() {
            data["labels"] = json!([]);
        }
        let mut e = json!({
            "action": action, "type": "Issue", "data": data, "url": view["url"],
            "createdAt": "2026-12-04T12:00:00.000Z", "organizationId": ORGANIZATION,
            "webhookTimestamp": now_ms(), "webhookId": "webhook-1",
            "actor": {"id": "user-ann", "type": "user", "name": "Ann"},
        });
        if let Some(from) = updated_from {
            e["updatedFrom"] = from;
        }
        e
    }

    /// Moves an issue into another state (what a person does in Linear).
    pub fn set_state(&self, issue: &str, state: &str) {
        self.with(|w| {
            if let Some(i) = w.issues.get_mut(issue) {
                i["state"] = json!(state);
            }
        });
    }

    pub fn activities(&self, agent_session: &str) -> Vec<Activity> {
        self.with(|w| {
            w.activities
                .iter()
                .filter(|a| a.agent_session == agent_session)
                .cloned()
                .collect()
        })
    }

    pub fn session_updates(&self, agent_session: &str) -> Vec<Value> {
        self.with(|w| {
            w.session_updates
                .iter()
                .filter(|(id, _)| id == agent_session)
                .map(|(_, v)| v.clone())
                .collect()
        })
    }

    pub fn issue_updates(&self) -> Vec<(String, Value)> {
        self.with(|w| w.issue_updates.clone())
    }

    pub fn calls(&self) -> Vec<String> {
        self.with(|w| w.calls.clone())
    }

    pub fn tokens_issued(&self) -> usize {
        self.with(|w| w.tokens_issued)
    }

    pub fn issued_tokens(&self) -> Vec<String> {
        self.with(|w| w.all_tokens.clone())
    }

    /// The next client-credentials tokens act in `organization` (another workspace the
    /// app is installed in), as Linear's grant may answer.
    pub fn mint_for(&self, organization: Option<&str>) {
        self.with(|w| w.mint_org = organization.map(str::to_owned));
    }

    /// The fields asked with a token of another workspace.
    pub fn foreign_calls(&self) -> Vec<String> {
        self.with(|w| w.foreign_calls.clone())
    }

    /// Every token issued so far stops working (as when an app's tokens are revoked).
    pub fn revoke_tokens(&self) {
        self.with(|w| w.tokens.clear());
    }

    /// Milliseconds since the fake started.
    pub fn elapsed_ms(&self) -> u128 {
        self.with(|w| w.started.map(|s| s.elapsed().as_millis()).unwrap_or(0))
    }
}

/// A delivery signed as Linear signs it: `(signature, body bytes)`.
pub fn signed(body: &Value, secret: &str) -> (String, Vec<u8>) {
    let bytes = body.to_string().into_bytes();
    let mut mac = match Hmac::<Sha256>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => return (String::new(), bytes),
    };
    mac.update(&bytes);
    (hex::encode(mac.finalize().into_bytes()), bytes)
}

fn oauth_error(status: StatusCode, error: &str, description: &str) -> Response {
    (
        status,
        Json(json!({"error": error, "error_description": description})),
    )
        .into_response()
}

async fn authorize(
    State(world): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let need = |k: &str| q.get(k).filter(|v| !v.is_empty());
    if need("client_id").map(String::as_str) != Some(CLIENT_ID) {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_client",
            "unknown client_id",
        );
    }
    let (Some(redirect), Some(state)) = (need("redirect_uri"), need("state")) else {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "redirect_uri and state are required",
        );
    };
    if need("response_type").map(String::as_str) != Some("code")
        || need("actor").map(String::as_str) != Some("app")
    {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "response_type=code and actor=app",
        );
    }
    let code = format!("code-{}", rand::random::<u64>());
    world
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .codes
        .insert(code.clone(), redirect.clone());
    let mut to = match url::Url::parse(redirect) {
        Ok(u) => u,
        Err(_) => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "redirect_uri is not a URL",
            )
        }
    };
    to.query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", state);
    (StatusCode::FOUND, [("Location", to.to_string())]).into_response()
}

async fn token(State(world): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let form_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !form_type.starts_with("application/x-www-form-urlencoded") {
        return oauth_error(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "the token endpoint takes a form",
        );
    }
    let form: HashMap<String, String> = url::form_urlencoded::parse(&body).into_owned().collect();
    let get = |k: &str| form.get(k).map(String::as_str);
    if get("client_id") != Some(CLIENT_ID) || get("client_secret") != Some(CLIENT_SECRET) {
        return oauth_error(
            StatusCode::UNAUTHORIZED,
            "invalid_client",
            "client authentication failed",
        );
    }
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    match get("grant_type") {
        Some("authorization_code") => {
            let code = get("code").unwrap_or("");
            match w.codes.remove(code) {
                Some(redirect) if Some(redirect.as_str()) == get("redirect_uri") => {}
                Some(_) => {
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "redirect_uri does not match",
                    )
                }
                None => {
                    return oauth_error(
                        StatusCode::BAD_REQUEST,
                        "invalid_grant",
                        "unknown or used code",
                    )
                }
            }
        }
        Some("client_credentials") => {
            let scope = get("scope").unwrap_or("");
            if !scope.split([',', ' ']).any(|s| s == "write") {
                return oauth_error(
                    StatusCode::BAD_REQUEST,
                    "invalid_scope",
                    "scope must be given",
                );
            }
        }
        _ => {
            return oauth_error(
                StatusCode::BAD_REQUEST,
                "unsupported_grant_type",
                "unsupported grant_type",
            )
        }
    }
    let token = format!("lin_oauth_{:032x}", rand::random::<u128>());
    let expires_in = 30 * 24 * 3600;
    w.tokens.insert(token.clone(), now_ms() + expires_in * 1000);
    let org = match get("grant_type") {
        Some("client_credentials") => w.mint_org.clone(),
        _ => None,
    };
    w.token_org
        .insert(token.clone(), org.unwrap_or_else(|| ORGANIZATION.into()));
    w.tokens_issued += 1;
    w.all_tokens.push(token.clone());
    Json(
        json!({"access_token": token, "token_type": "Bearer", "expires_in": expires_in,
                "scope": "read,write,app:assignable,app:mentionable"}),
    )
    .into_response()
}

fn gql_error(message: impl Into<String>, code: &str) -> Value {
    json!({"message": message.into(), "extensions": {"code": code}})
}

async fn graphql(State(world): State<Shared>, headers: HeaderMap, body: Bytes) -> Response {
    let bearer = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("")
        .to_owned();
    let mut w = world.lock().unwrap_or_else(|e| e.into_inner());
    let live = w.tokens.get(&bearer).is_some_and(|exp| *exp > now_ms());
    if !live {
        w.calls.push("refused: authentication".into());
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"errors": [gql_error("Authentication required, not authenticated", "AUTHENTICATION_ERROR")]})),
        )
            .into_response();
    }
    let request: Value =
        match serde_json::from_slice(&body) {
            Ok(v) => v,
            Err(e) => return (
                StatusCode::BAD_REQUEST,
                Json(
                    json!({"errors": [gql_error(format!("invalid JSON: {e}"), "BAD_USER_INPUT")]}),
                ),
            )
                .into_response(),
        };
    let text = request["query"].as_str().unwrap_or("").to_owned();
    let variables = request["variables"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    w.caller_org = w
        .token_org
        .get(&bearer)
        .cloned()
        .unwrap_or_else(|| ORGANIZATION.into());
    match execute(&mut w, &text, &variables) {
        Ok(data) => Json(json!({"data": data})).into_response(),
        Err(Failure::Invalid(msg)) => {
            w.calls.push(format!("refused: {msg}"));
            (
                StatusCode::BAD_REQUEST,
                Json(json!({"errors": [gql_error(msg, "GRAPHQL_VALIDATION_FAILED")]})),
            )
                .into_response()
        }
        Err(Failure::Input(msg)) => {
            w.calls.push(format!("refused: {msg}"));
            Json(json!({"errors": [gql_error(msg, "INVALID_INPUT")], "data": null})).into_response()
        }
    }
}

enum Failure {
    /// The document does not fit the schema (HTTP 400).
    Invalid(String),
    /// The operation ran and was refused (HTTP 200 with `errors`).
    Input(String),
}

fn type_name<'a>(t: &'a s::Type<'a, String>) -> &'a str {
    match t {
        s::Type::NamedType(n) => n,
        s::Type::ListType(inner) | s::Type::NonNullType(inner) => type_name(inner),
    }
}

fn type_string(t: &s::Type<'_, String>) -> String {
    match t {
        s::Type::NamedType(n) => n.clone(),
        s::Type::ListType(inner) => format!("[{}]", type_string(inner)),
        s::Type::NonNullType(inner) => format!("{}!", type_string(inner)),
    }
}

/// Whether a variable of type `var` may be given where `arg` is expected.
fn fits(var: &s::Type<'_, String>, arg: &s::Type<'_, String>) -> bool {
    match (var, arg) {
        (s::Type::NonNullType(v), s::Type::NonNullType(a)) => fits(v, a),
        (s::Type::NonNullType(v), a) => fits(v, a),
        (_, s::Type::NonNullType(_)) => false,
        (s::Type::ListType(v), s::Type::ListType(a)) => fits(v, a),
        (s::Type::NamedType(v), s::Type::NamedType(a)) => v == a,
        _ => false,
    }
}

struct Schema<'a> {
    types: HashMap<String, &'a s::TypeDefinition<'a, String>>,
}

impl<'a> Schema<'a> {
    fn new(doc: &'a s::Document<'a, String>) -> Schema<'a> {
        let mut types = HashMap::new();
        for d in &doc.definitions {
            if let s::Definition::TypeDefinition(t) = d {
                let name = match t {
                    s::TypeDefinition::Scalar(x) => &x.name,
                    s::TypeDefinition::Object(x) => &x.name,
                    s::TypeDefinition::Interface(x) => &x.name,
                    s::TypeDefinition::Union(x) => &x.name,
                    s::TypeDefinition::Enum(x) => &x.name,
                    s::TypeDefinition::InputObject(x) => &x.name,
                };
                types.insert(name.clone(), t);
            }
        }
        Schema { types }
    }

    fn object(&self, name: &str) -> Option<&'a s::ObjectType<'a, String>> {
        match self.types.get(name) {
            Some(s::TypeDefinition::Object(o)) => Some(o),
            _ => None,
        }
    }

    /// A JSON value given for an input of type `t` (variables' values).
    fn check_input(&self, t: &s::Type<'_, String>, v: &Value, at: &str) -> Result<(), String> {
        match t {
            s::Type::NonNullType(inner) => {
                if v.is_null() {
                    return Err(format!("{at}: a value is required"));
                }
                self.check_input(inner, v, at)
            }
            _ if v.is_null() => Ok(()),
            s::Type::ListType(inner) => match v.as_array() {
                Some(items) => items
                    .iter()
                    .enumerate()
                    .try_for_each(|(i, x)| self.check_input(inner, x, &format!("{at}[{i}]"))),
                None => self.check_input(inner, v, at),
            },
            s::Type::NamedType(n) => match (n.as_str(), self.types.get(n)) {
                ("String" | "ID", _) if v.is_string() => Ok(()),
                ("Int", _) if v.is_i64() => Ok(()),
                ("Float", _) if v.is_number() => Ok(()),
                ("Boolean", _) if v.is_boolean() => Ok(()),
                ("JSONObject", _) if v.is_object() || v.is_array() => Ok(()),
                ("JSON" | "DateTime", _) => Ok(()),
                (_, Some(s::TypeDefinition::Enum(e))) => {
                    if v.as_str()
                        .is_some_and(|x| e.values.iter().any(|ev| ev.name == x))
                    {
                        Ok(())
                    } else {
                        Err(format!("{at}: {v} is not a value of {n}"))
                    }
                }
                (_, Some(s::TypeDefinition::InputObject(io))) => {
                    let Some(obj) = v.as_object() else {
                        return Err(format!("{at}: {n} is an object"));
                    };
                    for k in obj.keys() {
                        if !io.fields.iter().any(|f| &f.name == k) {
                            return Err(format!(
                                "{at}: field \"{k}\" is not defined by type \"{n}\""
                            ));
                        }
                    }
                    for f in &io.fields {
                        let given = obj.get(&f.name).unwrap_or(&Value::Null);
                        self.check_input(&f.value_type, given, &format!("{at}.{}", f.name))?;
                    }
                    Ok(())
                }
                _ => Err(format!("{at}: {v} is not a {n}")),
            },
        }
    }

    /// A selection on the object type `on`.
    fn check_selection(
        &self,
        on: &str,
        set: &q::SelectionSet<'_, String>,
        vars: &HashMap<String, s::Type<'static, String>>,
    ) -> Result<(), String> {
        let Some(object) = self.object(on) else {
            return Err(format!("\"{on}\" is not an object type"));
        };
        for item in &set.items {
            match item {
                q::Selection::Field(f) => {
                    if f.name == "__typename" {
                        continue;
                    }
                    let Some(def) = object.fields.iter().find(|d| d.name == f.name) else {
                        return Err(format!(
                            "Cannot query field \"{}\" on type \"{on}\".",
                            f.name
                        ));
                    };
                    for (name, value) in &f.arguments {
                        let Some(arg) = def.arguments.iter().find(|a| &a.name == name) else {
                            return Err(format!(
                                "Unknown argument \"{name}\" on field \"{on}.{}\".",
                                f.name
                            ));
                        };
                        if let q::Value::Variable(v) = value {
                            let Some(declared) = vars.get(v) else {
                                return Err(format!("Variable \"${v}\" is not defined."));
                            };
                            if !fits(declared, &arg.value_type) {
                                return Err(format!(
                                    "Variable \"${v}\" of type \"{}\" used in position expecting type \"{}\".",
                                    type_string(declared),
                                    type_string(&arg.value_type)
                                ));
                            }
                        }
                    }
                    for arg in &def.arguments {
                        let required = matches!(arg.value_type, s::Type::NonNullType(_))
                            && arg.default_value.is_none();
                        if required && !f.arguments.iter().any(|(n, _)| n == &arg.name) {
                            return Err(format!(
                                "Field \"{on}.{}\" argument \"{}\" is required.",
                                f.name, arg.name
                            ));
                        }
                    }
                    let inner = type_name(&def.field_type);
                    match self.object(inner) {
                        Some(_) if f.selection_set.items.is_empty() => {
                            return Err(format!("Field \"{}\" of type \"{inner}\" must have a selection of subfields.", f.name));
                        }
                        Some(_) => self.check_selection(inner, &f.selection_set, vars)?,
                        None if !f.selection_set.items.is_empty() => {
                            return Err(format!("Field \"{}\" must not have a selection since type \"{inner}\" has no subfields.", f.name));
                        }
                        None => {}
                    }
                }
                q::Selection::InlineFragment(fr) => {
                    let target = match &fr.type_condition {
                        Some(q::TypeCondition::On(t)) => t.as_str(),
                        None => on,
                    };
                    self.check_selection(target, &fr.selection_set, vars)?;
                }
                q::Selection::FragmentSpread(_) => {
                    return Err("named fragments are not used by this client".into());
                }
            }
        }
        Ok(())
    }
}

fn to_json(v: &q::Value<'_, String>, vars: &Map<String, Value>) -> Value {
    match v {
        q::Value::Variable(n) => vars.get(n).cloned().unwrap_or(Value::Null),
        q::Value::Int(n) => json!(n.as_i64()),
        q::Value::Float(f) => json!(f),
        q::Value::String(s) => json!(s),
        q::Value::Boolean(b) => json!(b),
        q::Value::Null => Value::Null,
        q::Value::Enum(e) => json!(e),
        q::Value::List(l) => Value::Array(l.iter().map(|x| to_json(x, vars)).collect()),
        q::Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (k.clone(), to_json(x, vars)))
                .collect(),
        ),
    }
}

/// A connection's page as its arguments ask: a `type`/`name` filter (`eq`), `first`, `last`.
fn page(v: &Value, args: &Map<String, Value>) -> Value {
    let Some(nodes) = v.get("nodes").and_then(|n| n.as_array()) else {
        return v.clone();
    };
    let mut nodes: Vec<Value> = nodes
        .iter()
        .filter(|n| {
            ["type", "name"].iter().all(|k| {
                match args.get("filter").and_then(|f| f[*k]["eq"].as_str()) {
                    Some(want) => n[*k].as_str() == Some(want),
                    None => true,
                }
            })
        })
        .cloned()
        .collect();
    if let Some(first) = args.get("first").and_then(|n| n.as_u64()) {
        nodes.truncate(first as usize);
    }
    if let Some(last) = args.get("last").and_then(|n| n.as_u64()) {
        let skip = nodes.len().saturating_sub(last as usize);
        nodes.drain(..skip);
    }
    json!({"nodes": nodes})
}

/// Only the fields asked for (connections paged by their arguments).
fn project(v: &Value, set: &q::SelectionSet<'_, String>, vars: &Map<String, Value>) -> Value {
    if set.items.is_empty() {
        return v.clone();
    }
    match v {
        Value::Array(items) => Value::Array(items.iter().map(|x| project(x, set, vars)).collect()),
        Value::Object(o) => {
            let mut out = Map::new();
            for item in &set.items {
                match item {
                    q::Selection::Field(f) => {
                        let key = f.alias.clone().unwrap_or_else(|| f.name.clone());
                        let args: Map<String, Value> = f
                            .arguments
                            .iter()
                            .map(|(k, x)| (k.clone(), to_json(x, vars)))
                            .collect();
                        let value = page(o.get(&f.name).unwrap_or(&Value::Null), &args);
                        out.insert(key, project(&value, &f.selection_set, vars));
                    }
                    q::Selection::InlineFragment(fr) => {
                        if let Value::Object(more) = project(v, &fr.selection_set, vars) {
                            out.extend(more);
                        }
                    }
                    q::Selection::FragmentSpread(_) => {}
                }
            }
            Value::Object(out)
        }
        other => other.clone(),
    }
}

fn execute(w: &mut World, text: &str, vars: &Map<String, Value>) -> Result<Value, Failure> {
    let schema_doc =
        s::parse_schema::<String>(SCHEMA).map_err(|e| Failure::Invalid(e.to_string()))?;
    let schema = Schema::new(&schema_doc);
    let doc = q::parse_query::<String>(text)
        .map_err(|e| Failure::Invalid(format!("Syntax Error: {e}")))?;
    let ops: Vec<&q::OperationDefinition<'_, String>> = doc
        .definitions
        .iter()
        .filter_map(|d| match d {
            q::Definition::Operation(o) => Some(o),
            q::Definition::Fragment(_) => None,
        })
        .collect();
    let [op] = ops.as_slice() else {
        return Err(Failure::Invalid("exactly one operation is expected".into()));
    };
    let (root, defs, set) = match op {
        q::OperationDefinition::Query(x) => ("Query", &x.variable_definitions, &x.selection_set),
        q::OperationDefinition::Mutation(x) => {
            ("Mutation", &x.variable_definitions, &x.selection_set)
        }
        q::OperationDefinition::SelectionSet(x) => ("Query", &Vec::new(), x),
        q::OperationDefinition::Subscription(_) => {
            return Err(Failure::Invalid("no subscriptions here".into()))
        }
    };
    let mut declared: HashMap<String, s::Type<'static, String>> = HashMap::new();
    for d in defs {
        let t: s::Type<'static, String> = retype(&d.var_type);
        schema
            .check_input(
                &t,
                vars.get(&d.name).unwrap_or(&Value::Null),
                &format!("${}", d.name),
            )
            .map_err(|e| {
                Failure::Invalid(format!("Variable \"${}\" got invalid value: {e}", d.name))
            })?;
        declared.insert(d.name.clone(), t);
    }
    schema
        .check_selection(root, set, &declared)
        .map_err(Failure::Invalid)?;
    let mut data = Map::new();
    for item in &set.items {
        let q::Selection::Field(f) = item else {
            continue;
        };
        let args: Map<String, Value> = f
            .arguments
            .iter()
            .map(|(k, v)| (k.clone(), to_json(v, vars)))
            .collect();
        w.calls.push(f.name.clone());
        let value = resolve(w, &f.name, &args).map_err(Failure::Input)?;
        let key = f.alias.clone().unwrap_or_else(|| f.name.clone());
        data.insert(key, project(&value, &f.selection_set, vars));
    }
    Ok(Value::Object(data))
}

fn retype(t: &q::Type<'_, String>) -> s::Type<'static, String> {
    match t {
        q::Type::NamedType(n) => s::Type::NamedType(n.clone()),
        q::Type::ListType(i) => s::Type::ListType(Box::new(retype(i))),
        q::Type::NonNullType(i) => s::Type::NonNullType(Box::new(retype(i))),
    }
}

fn issue_view(w: &World, id: &str) -> Option<Value> {
    let mut i = w.issues.get(id)?.clone();
    let team = w.teams.get(i["team"].as_str().unwrap_or(""))?.clone();
    let state = team["states"]["nodes"]
        .as_array()?
        .iter()
        .find(|s| s["id"] == i["state"])?
        .clone();
    i["team"] = json!({"id": team["id"], "key": team["key"], "name": team["name"]});
    i["state"] = state;
    Some(i)
}

fn resolve(w: &mut World, field: &str, args: &Map<String, Value>) -> Result<Value, String> {
    let arg = |k: &str| {
        args.get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned()
    };
    w.clock += 1;
    if w.caller_org != ORGANIZATION {
        // A token of another workspace sees only itself there.
        w.foreign_calls.push(field.to_owned());
        return match field {
            "viewer" => {
                let mut me = w.users.get(APP_USER).cloned().unwrap_or(Value::Null);
                me["organization"] =
                    json!({"id": w.caller_org, "name": "Elsewhere", "urlKey": "elsewhere"});
                Ok(me)
            }
            _ => Err("Entity not found".into()),
        };
    }
    match field {
        "viewer" => {
            let mut me = w.users.get(APP_USER).cloned().unwrap_or(Value::Null);
            me["organization"] = json!({"id": ORGANIZATION, "name": "Acme", "urlKey": "acme"});
            Ok(me)
        }
        "user" => w
            .users
            .get(&arg("id"))
            .cloned()
            .ok_or_else(|| "Entity not found: User".into()),
        "issue" => issue_view(w, &arg("id")).ok_or_else(|| "Entity not found: Issue".into()),
        "team" => {
            let team = w
                .teams
                .get(&arg("id"))
                .cloned()
                .ok_or("Entity not found: Team")?;
            Ok(team)
        }
        "issueRepositorySuggestions" => {
            let issue = arg("issueId");
            if !w.issues.contains_key(&issue) {
                return Err("Entity not found: Issue".into());
            }
            let candidates: Vec<String> = args["candidateRepositories"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .filter_map(|x| x["repositoryFullName"].as_str().map(str::to_lowercase))
                        .collect()
                })
                .unwrap_or_default();
            let suggestions: Vec<Value> = w
                .suggestions
                .get(&issue)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter(|(r, _)| candidates.contains(&r.to_lowercase()))
                .map(|(r, c)| json!({"repositoryFullName": r, "confidence": c, "hostname": "github.com"}))
                .collect();
            Ok(json!({"suggestions": suggestions}))
        }
        "agentActivityCreate" => {
            let input = &args["input"];
            let session = input["agentSessionId"].as_str().unwrap_or("");
            if !w.agent_sessions.contains_key(session) {
                return Err("Entity not found: AgentSession".into());
            }
            let content = &input["content"];
            let kind = content["type"].as_str().unwrap_or("");
            let text_ok = content["body"].as_str().is_some_and(|b| !b.is_empty());
            match kind {
                "thought" | "elicitation" | "response" | "error" if text_ok => {}
                "action" if content["action"].is_string() && content["parameter"].is_string() => {}
                "thought" | "elicitation" | "response" | "error" | "action" => {
                    return Err(format!("content of type {kind} lacks its fields"))
                }
                other => return Err(format!("unknown activity type {other:?}")),
            }
            let ephemeral = input["ephemeral"].as_bool().unwrap_or(false);
            if ephemeral && !matches!(kind, "thought" | "action") {
                return Err("only thought and action activities can be ephemeral".into());
            }
            let at_ms = w.started.map(|s| s.elapsed().as_millis()).unwrap_or(0);
            w.activities.push(Activity {
                agent_session: session.to_owned(),
                content: content.clone(),
                ephemeral,
                at_ms,
            });
            if let Some(s) = w.agent_sessions.get_mut(session) {
                s["status"] = json!(match kind {
                    "elicitation" => "awaitingInput",
                    "response" => "complete",
                    "error" => "error",
                    _ => "active",
                });
            }
            Ok(
                json!({"success": true, "lastSyncId": w.clock, "agentActivity": {"id": format!("act-{}", w.clock), "ephemeral": ephemeral, "signal": null}}),
            )
        }
        "agentSessionUpdate" => {
            let id = arg("id");
            let Some(session) = w.agent_sessions.get(&id).cloned() else {
                return Err("Entity not found: AgentSession".into());
            };
            let input = &args["input"];
            if let Some(plan) = input.get("plan") {
                let steps = plan.as_array().ok_or("plan is a list of steps")?;
                for s in steps {
                    let ok = s["content"].is_string()
                        && matches!(
                            s["status"].as_str(),
                            Some("pending" | "inProgress" | "completed" | "canceled")
                        );
                    if !ok {
                        return Err(format!(
                            "a plan step is {{content, status}} with a known status, not {s}"
                        ));
                    }
                }
            }
            w.session_updates.push((id, input.clone()));
            Ok(json!({"success": true, "lastSyncId": w.clock, "agentSession": session}))
        }
        "issueUpdate" => {
            let id = arg("id");
            let Some(view) = issue_view(w, &id) else {
                return Err("Entity not found: Issue".into());
            };
            let input = args["input"].clone();
            if let Some(state) = input["stateId"].as_str() {
                let team = w
                    .teams
                    .get(view["team"]["id"].as_str().unwrap_or(""))
                    .cloned()
                    .unwrap_or(Value::Null);
                let known = team["states"]["nodes"]
                    .as_array()
                    .is_some_and(|s| s.iter().any(|x| x["id"] == state));
                if !known {
                    return Err("the state is not one of the issue's team".into());
                }
                if let Some(i) = w.issues.get_mut(&id) {
                    i["state"] = json!(state);
                }
            }
            w.issue_updates.push((id.clone(), input));
            Ok(json!({"success": true, "lastSyncId": w.clock, "issue": issue_view(w, &id)}))
        }
        other => Err(format!("no resolver for {other}")),
    }
}
