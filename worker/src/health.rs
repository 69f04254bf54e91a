//! `GET /health`: each part asked whether it answers (D1, a Durable Object, the sandbox
//! provider, the GitHub App), what is configured, and the status a load balancer reads.

use crate::http::{internal, now_ms, ApiResult};
use inspect_github::app as github_app;
use inspect_protocol::health::{CheckResult, DurableProbe, HealthReport};
use inspect_protocol::providers::{ProviderCall, ProviderProbe};
use worker::{Env, Response};

fn check<T>(started: f64, r: std::result::Result<T, String>) -> CheckResult {
    CheckResult {
        ok: r.is_ok(),
        latency_ms: now_ms() - started,
        detail: r.err(),
    }
}

pub(crate) async fn health(env: &Env) -> ApiResult<Response> {
    use inspect_protocol::health::PartCheck;
    let t0 = now_ms();
    let d1 = check(t0, d1_round_trip(env).await);
    let t1 = now_ms();
    let durable_object = check(t1, durable_round_trip(env).await);
    let setting = |n: &str| crate::db::setting(env, n);
    let configured = |names: &[&str]| names.iter().all(|n| setting(n).is_some());
    let part = |configured: bool| PartCheck {
        configured,
        ok: None,
        latency_ms: None,
        detail: None,
        disk: None,
    };
    // The sandbox provider, asked whether it answers (the local host adds its disk use).
    let mut sandbox_provider = part(false);
    let t = now_ms();
    let probe = ProviderCall::Probe;
    match inspect_runtime::binding::ask_providers::<ProviderProbe>(env, &probe).await {
        Ok(probe) if !probe.configured => sandbox_provider.detail = Some(probe.detail),
        answer => {
            sandbox_provider.configured = true;
            sandbox_provider.latency_ms = Some(now_ms() - t);
            sandbox_provider.ok = Some(answer.is_ok());
            match answer {
                Ok(probe) => {
                    sandbox_provider.detail = Some(probe.detail);
                    sandbox_provider.disk = probe.disk;
                }
                Err(e) => sandbox_provider.detail = Some(e.to_string()),
            }
        }
    }
    // The GitHub App: configured, and able to mint an installation token.
    let mut github_app = part(configured(&[
        "GITHUB_APP_ID",
        "GITHUB_APP_INSTALLATION_ID",
        "GITHUB_APP_PRIVATE_KEY",
    ]));
    if github_app.configured {
        let t = now_ms();
        let minted = github_app::installation_token(env, t as i64).await;
        github_app.latency_ms = Some(now_ms() - t);
        github_app.ok = Some(minted.is_ok());
        github_app.detail = minted.err().map(|e| e.message);
    }
    let sign_in = part(
        configured(&["GITHUB_CLIENT_ID", "GITHUB_CLIENT_SECRET"])
            || configured(&["GOOGLE_CLIENT_ID", "GOOGLE_CLIENT_SECRET"]),
    );
    let github_bot = part(configured(&["GITHUB_WEBHOOK_SECRET"]) && github_app.configured);
    let secrets_key = part(configured(&[inspect_secrets::KEY_VAR]));
    // Only what is set up counts against the status.
    let ok = d1.ok
        && durable_object.ok
        && sandbox_provider.ok != Some(false)
        && github_app.ok != Some(false);
    let report = HealthReport {
        status: if ok { "ok" } else { "degraded" }.into(),
        version: crate::VERSION.into(),
        d1,
        durable_object,
        sandbox_provider,
        github_app,
        sign_in,
        github_bot,
        secrets_key,
    };
    let resp = inspect_runtime::answer::json_ok(&report).map_err(internal)?;
    Ok(if ok { resp } else { resp.with_status(503) })
}

async fn d1_round_trip(env: &Env) -> std::result::Result<(), String> {
    // A migrated table, so the check also proves the migrations were applied.
    crate::db::first::<serde_json::Value>(env, "SELECT COUNT(*) AS n FROM sessions", &[])
        .await
        .map_err(|e| e.message)?;
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
