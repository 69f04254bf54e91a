//! The Worker's fetch entry: the thin runtime shell around [`crate::routes`].

use crate::routes::{match_route, not_found, Route};
use inspect_protocol::health::{CheckResult, DurableProbe, HealthReport};
use inspect_protocol::ApiError;
use worker::{event, Context, Env, Method, Request, Response, Result};

#[event(start)]
fn start() {
    console_error_panic_hook::set_once();
}

#[event(fetch)]
async fn fetch(req: Request, env: Env, _ctx: Context) -> Result<Response> {
    let method = req.method().to_string();
    let path = req.path();
    let outcome = match match_route(&method, &path) {
        Some(Ok(route)) => serve(route, req, &env).await,
        Some(Err(e)) => Err(e),
        None => return serve_asset_or_404(req, &env, &method, &path).await,
    };
    match outcome {
        Ok(resp) => Ok(resp),
        Err(e) => error_response(&e),
    }
}

pub(crate) fn error_response(err: &ApiError) -> Result<Response> {
    Ok(Response::from_json(&err.body())?.with_status(err.status()))
}

async fn serve(route: Route, _req: Request, env: &Env) -> std::result::Result<Response, ApiError> {
    match route {
        Route::Health => health(env).await,
    }
}

fn now_ms() -> f64 {
    worker::Date::now().as_millis() as f64
}

fn check<T>(started: f64, r: std::result::Result<T, String>) -> CheckResult {
    CheckResult {
        ok: r.is_ok(),
        latency_ms: now_ms() - started,
        detail: r.err(),
    }
}

async fn health(env: &Env) -> std::result::Result<Response, ApiError> {
    let t0 = now_ms();
    let d1 = check(t0, d1_round_trip(env).await);
    let t1 = now_ms();
    let durable_object = check(t1, durable_round_trip(env).await);
    let ok = d1.ok && durable_object.ok;
    let report = HealthReport {
        status: if ok { "ok" } else { "degraded" }.into(),
        version: crate::VERSION.into(),
        d1,
        durable_object,
    };
    let resp = Response::from_json(&report).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(if ok { resp } else { resp.with_status(503) })
}

async fn d1_round_trip(env: &Env) -> std::result::Result<(), String> {
    let db = env.d1("DB").map_err(|e| e.to_string())?;
    // A migrated table, so the check also proves the migrations were applied.
    db.prepare("SELECT COUNT(*) AS n FROM schema_migrations_marker")
        .first::<serde_json::Value>(None)
        .await
        .map_err(|e| e.to_string())?;
    Ok(())
}

async fn durable_round_trip(env: &Env) -> std::result::Result<(), String> {
    let ns = env.durable_object("SESSION").map_err(|e| e.to_string())?;
    let stub = ns
        .id_from_name("health-probe")
        .and_then(|id| id.get_stub())
        .map_err(|e| e.to_string())?;
    let mut resp = stub
        .fetch_with_str("https://session/internal/health")
        .await
        .map_err(|e| e.to_string())?;
    if resp.status_code() != 200 {
        return Err(format!("object answered {}", resp.status_code()));
    }
    let probe: DurableProbe = resp.json().await.map_err(|e| e.to_string())?;
    if probe.probes < 1 {
        return Err("object did not record the probe".into());
    }
    Ok(())
}

/// Paths that are no API route go to the static assets of `web/`; a browser navigation to
/// an unknown path gets the app's `index.html` so client-side routes work; anything else
/// answers the JSON 404.
async fn serve_asset_or_404(req: Request, env: &Env, method: &str, path: &str) -> Result<Response> {
    let is_read = matches!(req.method(), Method::Get | Method::Head);
    if is_read {
        if let Ok(assets) = env.assets("ASSETS") {
            let wants_html = req
                .headers()
                .get("Accept")
                .ok()
                .flatten()
                .is_some_and(|a| a.contains("text/html"));
            let resp = assets.fetch_request(req).await?;
            if resp.status_code() != 404 {
                return Ok(resp);
            }
            if wants_html {
                return assets.fetch("https://assets/index.html", None).await;
            }
        }
    }
    error_response(&not_found(method, path))
}
