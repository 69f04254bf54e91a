//! E2B as a sandbox provider: calls to E2B's REST API and to each sandbox's `envd`, built
//! by this crate. Persistent resume in place: stop pauses the sandbox, resume connects
//! to it again (the same machine, the same identity) and starts the supervisor if it is
//! not running.

use crate as e2b;
use crate::E2bConfig;
use inspect_protocol::images::{BuildImageRequest, BuildStarted};
use inspect_protocol::provider::{SandboxInfo, SandboxRef, SnapshotInfo, SpawnRequest};
use inspect_provider::{ProviderError, ProviderKind, Resumed, SandboxProvider};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use worker::Method;

/// Creating and connecting wait for E2B to boot or resume the machine.
const CALL_DEADLINE: Duration = Duration::from_secs(90);
const START_DEADLINE: Duration = Duration::from_secs(30);

pub struct E2bProvider {
    pub cfg: E2bConfig,
}

thread_local! {
    /// The plan's longest lifetime once E2B has said it (a 400 to a longer one): every
    /// later call of this isolate asks for no more.
    static PLAN_LIMIT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

fn failure(status: u16, body: &str, secrets: &[&str]) -> ProviderError {
    match e2b::classify(status, body, secrets) {
        Some(f) => ProviderError::from_vendor("e2b", f),
        None => ProviderError::Permanent(format!("e2b answered 409: {body}")),
    }
}

/// What a call came to: the answer, or a 404 or a 409 as such.
enum Got {
    Answer(Value),
    NotFound,
    Conflict,
}

impl E2bProvider {
    /// The settings as this plan allows them.
    fn cfg(&self) -> E2bConfig {
        self.cfg.within_plan(PLAN_LIMIT.with(|l| l.get()))
    }

    /// A call that asks for a lifetime (`body` made from the settings): refused as longer
    /// than the plan allows, it is asked again once within the plan's limit.
    async fn call_for_lifetime(
        &self,
        path: &str,
        body: impl Fn(&E2bConfig) -> Value,
        secrets: &[&str],
    ) -> Result<Got, ProviderError> {
        match self
            .call(Method::Post, path, Some(&body(&self.cfg())), secrets)
            .await
        {
            Err(ProviderError::Permanent(m)) => match e2b::plan_limit(&m) {
                Some(limit) if Some(limit) != PLAN_LIMIT.with(|l| l.get()) => {
                    PLAN_LIMIT.with(|l| l.set(Some(limit)));
                    self.call(Method::Post, path, Some(&body(&self.cfg())), secrets)
                        .await
                }
                _ => Err(ProviderError::Permanent(m)),
            },
            other => other,
        }
    }

    async fn call(
        &self,
        method: Method,
        path_or_url: &str,
        body: Option<&Value>,
        secrets: &[&str],
    ) -> Result<Got, ProviderError> {
        let url = if path_or_url.starts_with("http") {
            path_or_url.to_owned()
        } else {
            self.cfg.url(path_or_url)
        };
        let (status, text) = inspect_provider::http::call(
            method,
            &url,
            &[("X-API-Key", self.cfg.api_key.as_str())],
            body.map(Value::to_string),
            CALL_DEADLINE,
        )
        .await
        .map_err(|e| ProviderError::Transient(format!("e2b: {e}")))?;
        match status {
            200..=299 => Ok(Got::Answer(
                serde_json::from_str(&text).unwrap_or(Value::Null),
            )),
            404 => Ok(Got::NotFound),
            409 => Ok(Got::Conflict),
            _ => Err(failure(status, &text, secrets)),
        }
    }

    async fn list(&self, key: &str, value: &str) -> Result<Value, ProviderError> {
        match self
            .call(Method::Get, &self.cfg.listed(key, value), None, &[])
            .await?
        {
            Got::Answer(v) => Ok(v),
            _ => Ok(Value::Null),
        }
    }

    /// E2B's sandbox for our sandbox `sandbox_id`, found by its metadata.
    async fn find(&self, sandbox_id: &str) -> Result<Option<Value>, ProviderError> {
        Ok(e2b::first_listed(
            &self.list(e2b::META_SANDBOX, sandbox_id).await?,
        ))
    }

    /// How many sandboxes of ours E2B holds (the health check's question).
    pub async fn count(&self) -> Result<usize, ProviderError> {
        Ok(e2b::listed_ids(&self.list(e2b::META_FRAMEWORK, "open-inspect").await?).len())
    }

    /// Runs `body` (a `/bin/sh -c` process) through the sandbox's `envd`, to its end.
    async fn run(&self, e2b_id: &str, access_token: &str, body: Vec<u8>) -> Result<(), String> {
        let headers = e2b::envd_headers(e2b_id, access_token);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (status, bytes) = inspect_provider::http::call_bytes(
            Method::Post,
            &self.cfg.process_start_url(e2b_id),
            &headers,
            Some((e2b::CONNECT_JSON, body)),
            START_DEADLINE,
        )
        .await?;
        if !(200..300).contains(&status) {
            return Err(format!(
                "envd answered {status}: {}",
                String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        }
        e2b::read_process_stream(&bytes)
    }

    /// Starts the supervisor through the sandbox's `envd`, and checks it is up: the start
    /// command backgrounds it, so it succeeds whatever becomes of the supervisor.
    async fn start_supervisor(&self, e2b_id: &str, access_token: &str) -> Result<(), String> {
        self.run(e2b_id, access_token, e2b::start_supervisor_body())
            .await?;
        self.run(e2b_id, access_token, e2b::check_supervisor_body())
            .await
    }

    /// Starts the supervisor in a sandbox just made or resumed. A new sandbox that cannot
    /// start it is killed (without its supervisor it only costs money); a resumed one holds
    /// the person's workspace, so it is tried once more and then kept for the next resume.
    async fn started(
        &self,
        made: &Value,
        req: &SpawnRequest,
        resumed: bool,
    ) -> Result<SandboxInfo, ProviderError> {
        let id = made["sandboxID"].as_str().unwrap_or_default().to_owned();
        let token = made["envdAccessToken"].as_str().unwrap_or_default();
        let mut outcome = self.start_supervisor(&id, token).await;
        if resumed && outcome.is_err() {
            outcome = self.start_supervisor(&id, token).await;
        }
        if let Err(why) = outcome {
            if !resumed {
                let _ = self
                    .call(Method::Delete, &format!("/sandboxes/{id}"), None, &[])
                    .await;
            }
            return Err(ProviderError::Transient(format!(
                "e2b: the supervisor did not start in sandbox {id}{}: {why}",
                if resumed {
                    " (kept, with its workspace)"
                } else {
                    ""
                }
            )));
        }
        let tunnel_urls: BTreeMap<String, String> = req
            .vendor_ports()
            .iter()
            .map(|p| (p.to_string(), self.cfg.port_url(&id, *p)))
            .collect();
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: req.sandbox_id.clone(),
            session_id: req.session_id.clone(),
            status: "running".into(),
            runtime_version: self.cfg.template_id.clone(),
            tunnel_urls,
            detail: None,
            vendor_id: None,
        })
    }
}

impl SandboxProvider for E2bProvider {
    fn kind(&self) -> ProviderKind {
        ProviderKind::E2b
    }

    async fn create(&self, req: &SpawnRequest) -> Result<SandboxInfo, ProviderError> {
        let secrets: Vec<&str> = req
            .env
            .values()
            .map(String::as_str)
            .chain([req.sandbox_token.as_str()])
            .collect();
        let made = match self
            .call_for_lifetime("/sandboxes", |cfg| e2b::create_body(cfg, req), &secrets)
            .await?
        {
            Got::Answer(v) => v,
            Got::NotFound => {
                return Err(ProviderError::Permanent(format!(
                    "e2b: no template {}",
                    self.cfg.template_id
                )))
            }
            Got::Conflict => {
                return Err(ProviderError::Transient(
                    "e2b answered 409 to a create".into(),
                ))
            }
        };
        self.started(&made, req, false).await
    }

    async fn status(&self, sandbox: &SandboxRef) -> Result<SandboxInfo, ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let found = self.find(sandbox_id).await?;
        let (status, detail) = match &found {
            Some(s) => e2b::status_of(s),
            None => (
                "exited",
                Some("no such sandbox (killed or expired)".to_owned()),
            ),
        };
        Ok(SandboxInfo {
            editor: None,
            desktop: None,
            sandbox_id: sandbox_id.to_owned(),
            session_id: found
                .as_ref()
                .and_then(|s| s["metadata"][e2b::META_SESSION].as_str())
                .unwrap_or_default()
                .to_owned(),
            status: status.into(),
            runtime_version: self.cfg.template_id.clone(),
            tunnel_urls: Default::default(),
            detail,
            vendor_id: None,
        })
    }

    /// Pauses the sandbox: its memory and disk are kept until it is resumed or deleted.
    async fn stop(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let sandbox_id = sandbox.sandbox_id.as_str();
        let Some(s) = self.find(sandbox_id).await? else {
            return Ok(());
        };
        if s["state"] == "paused" {
            return Ok(());
        }
        let id = s["sandboxID"].as_str().unwrap_or_default();
        // 404 (gone) and 409 (paused already) are what stopping wanted.
        self.call(Method::Post, &format!("/sandboxes/{id}/pause"), None, &[])
            .await
            .map(|_| ())
    }

    /// Kills a sandbox that never became ready (a paused one would be kept until the
    /// session is deleted, and billed for its storage).
    async fn discard(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some(s) = self.find(&sandbox.sandbox_id).await? else {
            return Ok(());
        };
        let id = s["sandboxID"].as_str().unwrap_or_default();
        self.call(Method::Delete, &format!("/sandboxes/{id}"), None, &[])
            .await
            .map(|_| ())
    }

    async fn resume(
        &self,
        previous: &SandboxRef,
        req: &SpawnRequest,
    ) -> Result<Resumed, ProviderError> {
        let previous = previous.sandbox_id.as_str();
        let Some(s) = self.find(previous).await? else {
            return Ok(Resumed::Gone);
        };
        let id = s["sandboxID"].as_str().unwrap_or_default().to_owned();
        let mut connected = match self
            .call_for_lifetime(&format!("/sandboxes/{id}/connect"), e2b::connect_body, &[])
            .await?
        {
            Got::Answer(v) => v,
            Got::NotFound => return Ok(Resumed::Gone),
            Got::Conflict => {
                return Err(ProviderError::Transient(format!(
                    "e2b: sandbox {id} is still pausing"
                )))
            }
        };
        if connected["sandboxID"].is_null() {
            connected["sandboxID"] = Value::String(id);
        }
        self.started(&connected, req, true)
            .await
            .map(|info| Resumed::Started(Box::new(info)))
    }

    /// A running turn keeps its sandbox: a whole lifetime from now (within the plan).
    async fn extend(&self, sandbox: &SandboxRef) -> Result<(), ProviderError> {
        let Some(s) = self.find(&sandbox.sandbox_id).await? else {
            return Ok(());
        };
        let id = s["sandboxID"].as_str().unwrap_or_default();
        let body = e2b::extend_body(&self.cfg());
        self.call(
            Method::Post,
            &format!("/sandboxes/{id}/timeout"),
            Some(&body),
            &[],
        )
        .await
        .map(|_| ())
    }

    async fn snapshot(&self, _sandbox: &SandboxRef) -> Result<SnapshotInfo, ProviderError> {
        Err(ProviderError::Permanent(
            "e2b sandboxes pause with their disk and memory; they take no snapshots".into(),
        ))
    }

    async fn runtime_version(&self) -> Result<String, ProviderError> {
        Ok(self.cfg.template_id.clone())
    }

    async fn delete_session(
        &self,
        session_id: &str,
        _known: &[SandboxRef],
    ) -> Result<(), ProviderError> {
        let list = self.list(e2b::META_SESSION, session_id).await?;
        for id in e2b::listed_ids(&list) {
            self.call(Method::Delete, &format!("/sandboxes/{id}"), None, &[])
                .await?;
        }
        Ok(())
    }

    async fn build_image(&self, _req: &BuildImageRequest) -> Result<BuildStarted, ProviderError> {
        Err(ProviderError::Permanent(
            "prebuilt images are not built on e2b by this build (the template is the image)".into(),
        ))
    }

    async fn delete_image(&self, _image_id: &str) -> Result<(), ProviderError> {
        Ok(())
    }

    /// E2B serves every port of a running sandbox at its own host name.
    async fn expose_port(&self, sandbox: &SandboxRef, port: u16) -> Result<String, ProviderError> {
        let found = self.find(&sandbox.sandbox_id).await?;
        let Some(id) = found.as_ref().and_then(|s| s["sandboxID"].as_str()) else {
            return Err(ProviderError::Permanent("e2b: no such sandbox".into()));
        };
        Ok(self.cfg.port_url(id, port))
    }
}
