//! The D1 sessions index: the rows `GET /sessions` lists. Each session's object keeps its
//! row current; the Worker writes it on create and removes it on delete.

use crate::listing::{encode_cursor, ListQuery};
use inspect_protocol::session::{
    Actor, RepositoryRef, SessionList, SessionState, SessionStatus, SessionSummary,
};
use inspect_protocol::ApiError;
use serde::Deserialize;
use wasm_bindgen::JsValue;
use worker::Env;

fn unavailable(e: worker::Error) -> ApiError {
    ApiError::new(
        inspect_protocol::ErrorCode::Unavailable,
        format!("index: {e}"),
    )
}

fn opt(v: &Option<String>) -> JsValue {
    v.as_deref().map_or(JsValue::NULL, JsValue::from)
}

/// Statements written in one batch with a new session's index row, given its id: what
/// else records the session as made (an automation's run records its session).
pub type AlsoIndexed<'a> = &'a dyn Fn(&str) -> Vec<(&'static str, Vec<JsValue>)>;

/// Indexes a new session (with what `also` adds, in the same batch), its rows grouped with
/// those of the sessions made with it (`rows`: one batch for those that come together).
/// Written twice, the batch leaves what it left once (a retry after an answer lost).
pub async fn insert(
    env: &Env,
    state: &SessionState,
    actor: &Actor,
    (source, also, rows): (
        inspect_protocol::usage::SessionSource,
        Option<AlsoIndexed<'_>>,
        &crate::lookups::Grouped<Vec<worker::D1PreparedStatement>>,
    ),
) -> Result<(), ApiError> {
    let db = env.d1("DB").map_err(unavailable)?;
    let repos = serde_json::to_string(&state.repositories).unwrap_or_else(|_| "[]".into());
    let row = db
        .prepare(
            "INSERT OR IGNORE INTO sessions (id, title, status, repo_owner, repo_name, repositories, created_by, created_by_name, message_count, created_at, updated_at, source)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 0, ?9, ?9, ?10)",
        )
        .bind(&[
            state.id.as_str().into(),
            opt(&state.title),
            state.status.as_str().into(),
            opt(&state.repo_owner),
            opt(&state.repo_name),
            repos.into(),
            actor.user_id.as_str().into(),
            actor.name.as_str().into(),
            (state.created_at as f64).into(),
            source.as_str().into(),
        ])
        .map_err(unavailable)?;
    let member = db
        .prepare("INSERT OR IGNORE INTO session_participants (session_id, user_id) VALUES (?1, ?2)")
        .bind(&[state.id.as_str().into(), actor.user_id.as_str().into()])
        .map_err(unavailable)?;
    let mut statements = vec![row, member];
    for (sql, args) in also.map(|also| also(&state.id)).unwrap_or_default() {
        statements.push(db.prepare(sql).bind(&args).map_err(unavailable)?);
    }
    let db = &db;
    let write = |groups: Vec<Vec<worker::D1PreparedStatement>>| async move {
        let all = groups.into_iter().flatten().collect();
        db.batch(all).await.map(drop).map_err(unavailable)
    };
    rows.write(statements, write).await
}

pub async fn remove(env: &Env, id: &str) -> Result<(), ApiError> {
    let db = env.d1("DB").map_err(unavailable)?;
    let a = db
        .prepare("DELETE FROM sessions WHERE id = ?1")
        .bind(&[id.into()])
        .map_err(unavailable)?;
    let b = db
        .prepare("DELETE FROM session_participants WHERE session_id = ?1")
        .bind(&[id.into()])
        .map_err(unavailable)?;
    db.batch(vec![a, b]).await.map_err(unavailable)?;
    Ok(())
}

#[derive(Deserialize)]
struct Row {
    id: String,
    title: Option<String>,
    status: String,
    repo_owner: Option<String>,
    repo_name: Option<String>,
    repositories: String,
    created_by: String,
    created_by_name: String,
    message_count: f64,
    created_at: f64,
    updated_at: f64,
    pr_url: Option<String>,
    pr_state: Option<String>,
}

pub async fn list(env: &Env, q: &ListQuery) -> Result<SessionList, ApiError> {
    let db = env.d1("DB").map_err(unavailable)?;
    let mut filters = Vec::new();
    let mut args: Vec<JsValue> = Vec::new();
    let arg = |v: JsValue, args: &mut Vec<JsValue>| {
        args.push(v);
        format!("?{}", args.len())
    };
    match &q.status {
        None => {
            let p = arg("archived".into(), &mut args);
            filters.push(format!("s.status != {p}"));
        }
        Some(None) => {}
        Some(Some(status)) => {
            let p = arg(status.as_str().into(), &mut args);
            filters.push(format!("s.status = {p}"));
        }
    }
    if let Some((owner, name)) = &q.repo {
        let o = arg(owner.as_str().into(), &mut args);
        let n = arg(name.as_str().into(), &mut args);
        filters.push(format!(
            "EXISTS (SELECT 1 FROM json_each(s.repositories) r WHERE json_extract(r.value, '$.owner') = {o} COLLATE NOCASE AND json_extract(r.value, '$.name') = {n} COLLATE NOCASE)"
        ));
    }
    if let Some(user) = &q.participant {
        let u = arg(user.as_str().into(), &mut args);
        filters.push(format!(
            "EXISTS (SELECT 1 FROM session_participants p WHERE p.session_id = s.id AND p.user_id = {u})"
        ));
    }
    if let Some(text) = &q.text {
        let p = arg(crate::listing::like_pattern(text).into(), &mut args);
        filters.push(format!(
            "(s.title LIKE {p} ESCAPE '\\' OR s.repositories LIKE {p} ESCAPE '\\' OR s.created_by_name LIKE {p} ESCAPE '\\' OR s.prompt_text LIKE {p} ESCAPE '\\')"
        ));
    }
    if let Some((t, id)) = &q.before {
        let tp = arg((*t as f64).into(), &mut args);
        let ip = arg(id.as_str().into(), &mut args);
        filters.push(format!(
            "(s.created_at < {tp} OR (s.created_at = {tp} AND s.id < {ip}))"
        ));
    }
    let limit = arg(((q.limit + 1) as f64).into(), &mut args);
    let filter = if filters.is_empty() {
        String::new()
    } else {
        format!("WHERE {}", filters.join(" AND "))
    };
    let sql = format!(
        "SELECT s.id, s.title, s.status, s.repo_owner, s.repo_name, s.repositories, s.created_by, s.created_by_name, s.message_count, s.created_at, s.updated_at, s.pr_url, s.pr_state
         FROM sessions s {filter} ORDER BY s.created_at DESC, s.id DESC LIMIT {limit}"
    );
    let result = db
        .prepare(sql)
        .bind(&args)
        .map_err(unavailable)?
        .all()
        .await
        .map_err(unavailable)?;
    let rows: Vec<Row> = result.results().map_err(unavailable)?;
    let has_more = rows.len() > q.limit;
    let sessions: Vec<SessionSummary> = rows
        .into_iter()
        .take(q.limit)
        .map(|r| SessionSummary {
            id: r.id,
            title: r.title,
            status: SessionStatus::parse(&r.status).unwrap_or(SessionStatus::Active),
            repo_owner: r.repo_owner,
            repo_name: r.repo_name,
            repositories: serde_json::from_str::<Vec<RepositoryRef>>(&r.repositories)
                .unwrap_or_default(),
            created_by: r.created_by,
            created_by_name: r.created_by_name,
            message_count: r.message_count as i64,
            created_at: r.created_at as i64,
            updated_at: r.updated_at as i64,
            pr_url: r.pr_url,
            pr_state: r.pr_state,
        })
        .collect();
    let cursor = if has_more {
        sessions.last().map(|s| encode_cursor(s.created_at, &s.id))
    } else {
        None
    };
    Ok(SessionList {
        sessions,
        cursor,
        has_more,
    })
}
