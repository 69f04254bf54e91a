//! The sandbox from the object's side: its socket, spawning through the provider,
//! snapshots and stops, and the one alarm.

use super::fanout::moves_deadlines;
use super::*;
use inspect_protocol::images::ImageBuild;
use inspect_protocol::session::SessionState;

/// A scope's ready images, as read for a spawn.
type ImagesRead = std::result::Result<Vec<ImageBuild>, ApiError>;
/// A sandbox's secrets, read and opened for a spawn.
type SecretsOpened = std::result::Result<inspect_secrets::Layered, ApiError>;

/// The session's repositories as (owner, name): what images and secrets are keyed by.
fn owner_names(state: &SessionState) -> Vec<(String, String)> {
    state
        .repositories
        .iter()
        .map(|r| (r.owner.clone(), r.name.clone()))
        .collect()
}

impl SessionDO {
    /// Points the one alarm slot at the earliest deadline, or clears it.
    pub(super) async fn schedule(&self) {
        let next = self.engine().next_deadline().ok().flatten();
        let storage = self.state.storage();
        let current = storage.get_alarm().await.ok().flatten();
        match next {
            Some(at) if current != Some(at) => {
                // An absolute time: a plain integer would be taken as an offset from now.
                let when = worker::js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(at as f64));
                let _ = storage.set_alarm(worker::ScheduledTime::new(when)).await;
            }
            None if current.is_some() => {
                let _ = storage.delete_alarm().await;
            }
            _ => {}
        }
    }

    /// Keeps the origin the session was created at, for its sandboxes to connect back to.
    /// Later requests do not move it: a session's sandboxes keep one address.
    pub(super) fn remember_origin(&self, req: &Request) {
        if self.origin_kept.get() {
            return;
        }
        let Some(origin) = req.headers().get(ORIGIN_HEADER).ok().flatten() else {
            return;
        };
        // A row back: the session exists, and its origin is set (now or before).
        let kept = self.store.query(
            "UPDATE session SET origin = COALESCE(origin, ?) WHERE id = 1 RETURNING 1",
            &[origin.as_str().into()],
        );
        self.origin_kept
            .set(kept.is_ok_and(|rows| !rows.is_empty()));
    }

    /// Checks a sandbox's credentials (bearer token + `X-Sandbox-ID`): `None` when they are
    /// good, else the refusal to send.
    pub(super) fn refuse_sandbox(&self, req: &Request) -> Option<Result<Response>> {
        let header = |name: &str| req.headers().get(name).ok().flatten().unwrap_or_default();
        let auth = header("Authorization");
        let token = auth.strip_prefix("Bearer ").unwrap_or_default().to_owned();
        let sandbox_id = header(inspect_protocol::auth::SANDBOX_ID_HEADER);
        match self.engine().authenticate_sandbox(&token, &sandbox_id) {
            Ok(Ok(())) => {}
            Ok(Err(refusal)) => {
                let code = match refusal.status() {
                    401 => inspect_protocol::ErrorCode::Unauthorized,
                    403 => inspect_protocol::ErrorCode::Forbidden,
                    404 => inspect_protocol::ErrorCode::NotFound,
                    _ => inspect_protocol::ErrorCode::Gone,
                };
                self.log(
                    LogLine::warn("sandbox", "refused")
                        .sandbox(&sandbox_id)
                        .detail(format!("{refusal:?}")),
                );
                return Some(json_error(&ApiError::new(
                    code,
                    format!("sandbox refused: {refusal:?}"),
                )));
            }
            Err(e) => return Some(json_error(&e)),
        }
        None
    }

    pub(super) async fn accept_sandbox_socket(&self, req: &Request) -> Result<Response> {
        if let Some(refusal) = self.refuse_sandbox(req) {
            return refusal;
        }
        let pair = WebSocketPair::new()?;
        let id = ids::new_id("ws");
        self.state
            .accept_websocket_with_tags(&pair.server, &[KIND_SANDBOX, id.as_str()]);
        pair.server.serialize_attachment(SocketTag {
            id: id.clone(),
            kind: KIND_SANDBOX.into(),
        })?;
        self.with_registry(|r| r.sockets.insert(id.clone(), pair.server));
        self.log(
            LogLine::info("sandbox", "connected").with(
                "sandbox",
                req.headers()
                    .get(inspect_protocol::auth::SANDBOX_ID_HEADER)
                    .ok()
                    .flatten(),
            ),
        );
        match self.engine().sandbox_opened(&id, now_ms()) {
            Ok(fx) => self.apply(fx),
            Err(e) => self.log(LogLine::error("sandbox", "open_failed").detail(e)),
        }
        self.send_setup_secrets().await;
        Response::from_websocket(pair.client)
    }

    /// A booting sandbox's set-up-only secrets, sent as it connects: its hooks wait for
    /// them. Opened from D1 each time, never kept in the object nor put on the timeline;
    /// a sandbox past its boot is sent none.
    async fn send_setup_secrets(&self) {
        let booting = self
            .engine()
            .sandbox_status()
            .is_ok_and(|s| matches!(s.as_str(), "spawning" | "connecting" | "syncing" | "setup"));
        if !booting || self.setup_secrets_named.get() == Some(false) {
            return;
        }
        match self.sandbox_secrets().await {
            Ok(layered) if !layered.setup.is_empty() => {
                let mut fx = Effects::none();
                fx.to_sandbox
                    .push(SandboxCommand::SetupSecrets { env: layered.setup });
                self.apply(fx);
            }
            Ok(_) => {}
            Err(e) => self.log(LogLine::warn("sandbox", "setup_secrets_unread").detail(e.message)),
        }
    }

    /// Our sandbox `sandbox_id` as the provider is asked about it (with the vendor's id,
    /// when the session kept one).
    pub(super) fn sandbox_at(&self, sandbox_id: &str) -> SandboxRef {
        self.engine()
            .sandbox_ref(sandbox_id)
            .unwrap_or_else(|_| SandboxRef::ours(sandbox_id))
    }

    /// An archived session gives back what its stopped sandbox held at the vendor (a
    /// Kubernetes workspace claim, a stopped Daytona/E2B/OpenComputer sandbox's disk): those
    /// count against the account's quota for as long as they are kept. Its work is on the
    /// session branch; an unarchived session starts from there. Snapshots stay.
    pub(super) async fn release_workspace(&self) {
        let Some(provider) = self.provider() else {
            return;
        };
        if !provider.capabilities().persistent_resume {
            return;
        }
        let engine = self.engine();
        let sid = self.session_id().unwrap_or_default();
        let known = engine.vendor_sandboxes().unwrap_or_default();
        match provider.delete_session(&sid, &known).await {
            Ok(()) => {
                let _ = engine.forget_workspace();
                self.log(
                    LogLine::info("sandbox", "workspace_released").with("session", sid.as_str()),
                );
            }
            Err(e) => self.log(
                LogLine::warn("sandbox", "workspace_not_released")
                    .with("session", sid.as_str())
                    .detail(e),
            ),
        }
    }

    /// Carries out effects, including those that need the provider or the alarm: stop a
    /// sandbox given up on, spawn one for waiting prompts, move the alarm.
    pub(super) async fn carry_out(&self, fx: Effects) {
        let mut wanted = fx.spawn_wanted;
        let stop = fx.stop_sandbox.clone();
        let discard = fx.discard_sandbox;
        let snapshot = fx.snapshot_sandbox.clone();
        // A snapshot has a deadline of its own (an abandoned one must not hold the sandbox).
        let reschedule = moves_deadlines(&fx) || fx.snapshot_sandbox.is_some();
        // A spawn coming at once carries the index write these effects ask for.
        if wanted && stop.is_none() && snapshot.is_none() {
            self.hold_index();
        }
        self.apply(fx);
        // Providers that resume keep the workspace themselves: nothing to snapshot.
        // (Read from the settings only when needed: not on every frame.)
        let provider = snapshot
            .as_ref()
            .and_then(|_| self.provider())
            .filter(|p| p.capabilities().snapshots);
        // Where a snapshot ends the sandbox, only a sandbox being stopped is snapshotted.
        let snapshot = snapshot.filter(|id| {
            !provider
                .as_ref()
                .is_some_and(|p| p.capabilities().snapshot_ends_sandbox)
                || stop.as_deref() == Some(id.as_str())
        });
        if let (Some(id), Some(provider)) = (snapshot, provider) {
            let engine = self.engine();
            let previous = match engine.snapshot_started(&id, now_ms()) {
                Ok((previous, fx)) => {
                    self.apply(fx);
                    previous
                }
                Err(_) => None,
            };
            let started = now_ms();
            match provider.snapshot(&self.sandbox_at(&id)).await {
                Ok(info) => {
                    self.log(
                        LogLine::info("sandbox", "snapshot_saved")
                            .sandbox(&id)
                            .with("snapshot", info.snapshot_id.as_str())
                            .with("bytes", info.bytes)
                            .duration_ms(now_ms() - started),
                    );
                    if let Ok(fx) = engine.snapshot_saved(&info, now_ms()) {
                        self.apply(fx);
                    }
                }
                Err(e) => self.log(
                    LogLine::warn("sandbox", "snapshot_failed")
                        .sandbox(&id)
                        .detail(e),
                ),
            }
            if let Some(previous) = previous {
                if let Ok(fx) = engine.snapshot_ended(&id, &previous, now_ms()) {
                    // A prompt sent while a stopping sandbox was saved needs the next one.
                    wanted |= fx.spawn_wanted;
                    self.apply(fx);
                }
            }
        }
        if let Some((id, provider)) = stop.and_then(|id| self.provider().map(|p| (id, p))) {
            self.stopping.set(true);
            let at = self.sandbox_at(&id);
            let stopped = match discard {
                true => provider.discard(&at).await,
                false => provider.stop(&at).await,
            };
            self.stopping.set(false);
            // Room was made: the session that waited longest for it is told.
            self.wake_waiter();
            match stopped {
                Ok(()) => self.log(
                    LogLine::info("sandbox", if discard { "discarded" } else { "stopped" })
                        .sandbox(&id),
                ),
                Err(e) => self.log(
                    LogLine::warn("sandbox", "stop_failed")
                        .sandbox(&id)
                        .detail(e),
                ),
            }
            // A prompt that came while the provider was stopping it gets its sandbox now.
            if self.spawn_deferred.replace(false) {
                wanted = true;
            }
        }
        // A spawn points the alarm itself.
        let scheduled = self.spawn_if_wanted(wanted).await;
        if reschedule && !scheduled {
            self.schedule().await;
        }
    }

    /// Spawns a sandbox if the engine wants one and none is alive or on its way: whether
    /// it did (and so pointed the alarm at the next deadline).
    pub(super) async fn spawn_if_wanted(&self, wanted: bool) -> bool {
        let scheduled = self.spawn(wanted).await;
        // Whatever way it went, a held index write is not kept waiting.
        self.release_index();
        scheduled
    }

    async fn spawn(&self, wanted: bool) -> bool {
        if !wanted {
            return false;
        }
        // The prompt's echo leaves once its write is committed; the spawn's calls wait for
        // that commit rather than queue ahead of it (hundreds of prompts at once: every
        // echo came after every spawn's D1 calls).
        let _ = self.state.storage().sync().await;
        if self.stopping.get() {
            self.spawn_deferred.set(true);
            return false;
        }
        let engine = self.engine();
        // The settings are read once: the plan and the spawn use the same provider.
        let configured = ViaBinding::chosen(&self.env);
        let provider = configured.as_ref().ok();
        // Decide before begin_spawn replaces the record of the last sandbox.
        // The provider's runtime (a call to it) is asked only when something depends on it:
        // a snapshot that could be restored, or a prebuilt image to choose.
        let mut runtime = String::new();
        let plan = match &provider {
            Some(p) => {
                let caps = p.capabilities();
                let snapshot = engine.latest_snapshot().ok().flatten();
                if caps.restore && snapshot.is_some() {
                    runtime = p.runtime_version().await.unwrap_or_default();
                }
                engine
                    .spawn_plan_from(caps, snapshot.as_ref(), &runtime)
                    .ok()
            }
            None => None,
        };
        // A provider that resumes in place restarts the same machine: it keeps its identity.
        let in_place = match (&plan, &provider) {
            (Some(SpawnPlan::Resume { sandbox_id }), Some(p))
                if p.capabilities().resume_in_place =>
            {
                Some(sandbox_id.clone())
            }
            _ => None,
        };
        let begun = match &in_place {
            Some(previous) => engine.begin_resume(previous, now_ms()),
            None => engine.begin_spawn(now_ms()),
        };
        let Ok(Some((mut ticket, fx))) = begun else {
            return false;
        };
        self.apply(fx);
        // A resume onto a new machine carries the last workspace, and its work.
        if matches!(plan, Some(SpawnPlan::Resume { .. })) && in_place.is_none() {
            let _ = engine.workspace_carried(&ticket.sandbox_id, now_ms());
        }
        let mut restore = match &plan {
            Some(SpawnPlan::Restore { snapshot_id }) => Some(snapshot_id.clone()),
            _ => None,
        };
        let resume = match &plan {
            Some(SpawnPlan::Resume { sandbox_id }) => Some(sandbox_id.clone()),
            _ => None,
        };
        // The session as it is now, read once for the image, the request and the secrets.
        let state = engine.state();
        // Nothing of its own to start from: the newest compatible prebuilt image, if any
        // (read with the secrets, in one batch).
        let mut prebuilt = None;
        let mut secrets_read = None;
        if let (Some(SpawnPlan::Fresh { .. }), Some(p), Ok(state)) = (&plan, provider, &state) {
            let ready;
            (ready, secrets_read) = self.images_and_secrets(state).await;
            prebuilt = match ready {
                Some(ready) => self.prebuilt_image(state, p, &mut runtime, ready).await,
                None => None,
            };
            if prebuilt.is_some() {
                restore = prebuilt.clone();
            }
        }
        // The provider's call comes next: a held index write that no batch carried goes now.
        self.release_index();
        if let Some(SpawnPlan::Fresh { warning: Some(w) }) = &plan {
            let mut fx = Effects::none();
            fx.broadcast(ServerMessage::SandboxStatus {
                status: "spawning".into(),
                error: Some(w.clone()),
            });
            self.apply(fx);
        }
        let boot_mode = match (&prebuilt, &restore, &resume) {
            (_, _, Some(_)) => inspect_protocol::provider::BootMode::Resume,
            (Some(_), _, _) => inspect_protocol::provider::BootMode::Prebuilt,
            (None, Some(_), _) => inspect_protocol::provider::BootMode::SnapshotRestore,
            (None, None, None) => inspect_protocol::provider::BootMode::Fresh,
        };
        // The clients see which way the sandbox comes back.
        let coming = match boot_mode {
            inspect_protocol::provider::BootMode::Resume => Some("resuming"),
            inspect_protocol::provider::BootMode::SnapshotRestore => Some("restoring"),
            _ => None,
        };
        if let Some(status) = coming {
            let mut fx = Effects::none();
            fx.broadcast(ServerMessage::SandboxStatus {
                status: status.into(),
                error: None,
            });
            self.apply(fx);
        }
        let models = self.models().await;
        let request = state.and_then(|state| {
            let request = self.spawn_request(&state, &ticket, restore.clone(), boot_mode)?;
            Ok((request, state))
        });
        let request = match request {
            Ok((mut req, state)) => match secrets_read {
                Some(read) => read,
                None => self.secrets_for(&state).await,
            }
            .map(|layered| {
                self.setup_secrets_named
                    .set(Some(!layered.setup.is_empty()));
                req.env = layered.env;
                // Only their names: the values come over the socket when it boots.
                req.setup_secrets = layered.setup.into_keys().collect();
                req.models = models
                    .as_ref()
                    .map(inspect_models::compatible_models)
                    .unwrap_or_default();
                // A cloud vendor's sandbox keeps its ports behind its own gates.
                if let Some(key) = self.sandbox_gate_key(&ticket.sandbox_id) {
                    req.env
                        .insert(inspect_protocol::provider::GATE_KEY_VAR.into(), key);
                }
                req
            }),
            Err(e) => Err(e),
        };
        self.log(
            LogLine::info("sandbox", "spawn_requested")
                .sandbox(&ticket.sandbox_id)
                .with("restoreFrom", restore.clone())
                .with("resumes", resume.clone()),
        );
        let asked = now_ms();
        let result = match request {
            Ok(mut req) => match &configured {
                Ok(provider) => {
                    let mut made = match &resume {
                        Some(previous) => {
                            match provider.resume(&self.sandbox_at(previous), &req).await {
                                Ok(Resumed::Started(info)) => Ok(*info),
                                // Nothing left to resume: a fresh sandbox, and the timeline says so.
                                Ok(Resumed::Gone) => {
                                    // Resume, else restore, else fresh: the newest snapshot of
                                    // this runtime, where the provider restores.
                                    let snapshot = engine
                                        .latest_snapshot()
                                        .ok()
                                        .flatten()
                                        .filter(|s| {
                                            provider.capabilities().restore
                                                && s.runtime_version == runtime
                                        })
                                        .map(|s| s.snapshot_id);
                                    let why = match &snapshot {
                                    Some(s) => format!(
                                        "the last sandbox {previous} is gone: restoring its last snapshot {s}"
                                    ),
                                    None => format!(
                                        "the last sandbox {previous} is gone: starting fresh"
                                    ),
                                };
                                    if let Ok(fx) = engine.sandbox_warning("resume", &why, now_ms())
                                    {
                                        self.apply(fx);
                                    }
                                    req.boot_mode = match snapshot {
                                        Some(_) => {
                                            inspect_protocol::provider::BootMode::SnapshotRestore
                                        }
                                        None => inspect_protocol::provider::BootMode::Fresh,
                                    };
                                    req.restore_from = snapshot.clone();
                                    restore = snapshot;
                                    // Nothing of the last workspace comes along.
                                    let _ = engine.workspace_lost(&ticket.sandbox_id);
                                    // The machine that held the identity is gone: a new one.
                                    if in_place.is_some() {
                                        match engine.renew_identity(&ticket.sandbox_id, now_ms()) {
                                            Ok(Some(renewed)) => {
                                                req.sandbox_id = renewed.sandbox_id.clone();
                                                req.sandbox_token = renewed.token.clone();
                                                ticket = renewed;
                                            }
                                            _ => return false,
                                        }
                                    }
                                    provider.create(&req).await
                                }
                                Err(e) => Err(e),
                            }
                        }
                        None => provider.create(&req).await,
                    };
                    // An image the provider cannot use (deleted, unreadable) is not worth a
                    // failed spawn: start fresh at once, and say why.
                    if let (Some(image), Err(e)) = (&prebuilt, &made) {
                        if !matches!(e, inspect_provider::ProviderError::AtCapacity(_)) {
                            let why = format!(
                                "the prebuilt image {image} could not be used ({e}): starting fresh"
                            );
                            if let Ok(fx) = engine.sandbox_warning("prebuilt_image", &why, now_ms())
                            {
                                self.apply(fx);
                            }
                            req.boot_mode = inspect_protocol::provider::BootMode::Fresh;
                            req.restore_from = None;
                            restore = None;
                            prebuilt = None;
                            made = provider.create(&req).await;
                        }
                    }
                    made
                }
                Err(why) => Err(inspect_provider::ProviderError::Permanent(why.clone())),
            },
            Err(e) => Err(inspect_provider::ProviderError::Permanent(e.message)),
        };
        let took = now_ms() - asked;
        match &result {
            Ok(_) => self.log(
                LogLine::info("sandbox", "spawn_accepted")
                    .sandbox(&ticket.sandbox_id)
                    .duration_ms(took),
            ),
            Err(inspect_provider::ProviderError::AtCapacity(why)) => self.log(
                LogLine::warn("sandbox", "spawn_waiting")
                    .sandbox(&ticket.sandbox_id)
                    .detail(why),
            ),
            Err(e) => self.log(
                LogLine::error("sandbox", "spawn_failed")
                    .sandbox(&ticket.sandbox_id)
                    .duration_ms(took)
                    .detail(e),
            ),
        }
        if let Some(vendor_id) = result.as_ref().ok().and_then(|i| i.vendor_id.as_deref()) {
            if let Err(e) = engine.record_vendor_id(&ticket.sandbox_id, vendor_id, now_ms()) {
                self.log(
                    LogLine::error("sandbox", "vendor_id_not_kept")
                        .sandbox(&ticket.sandbox_id)
                        .detail(e),
                );
            }
        }
        if result.is_ok() {
            self.leave_waiters().await;
        }
        let fx = match result {
            Ok(info) => engine
                .spawn_accepted(&ticket.sandbox_id, now_ms())
                .and_then(|mut fx| {
                    // A gated sandbox's URLs are its gates': kept under the ports behind them.
                    let seen = match self.sandbox_gate_key(&ticket.sandbox_id) {
                        Some(_) => inspect_protocol::provider::ungated(
                            &ticket.sandbox_id,
                            &engine.sandbox_settings()?.tunnel_ports,
                            &info.tunnel_urls,
                        ),
                        None => inspect_protocol::provider::Ungated {
                            apps: info.tunnel_urls.clone(),
                            editor: info.editor.clone(),
                            desktop: info.desktop.clone(),
                        },
                    };
                    fx.merge(engine.set_tunnel_urls(&ticket.sandbox_id, &seen.apps)?);
                    engine.set_editor(&ticket.sandbox_id, seen.editor.as_ref())?;
                    engine.set_desktop(&ticket.sandbox_id, seen.desktop.as_ref())?;
                    if let (Some(snapshot_id), None) = (&restore, &prebuilt) {
                        fx.broadcast(ServerMessage::SandboxRestored {
                            sandbox_id: ticket.sandbox_id.clone(),
                            snapshot_id: snapshot_id.clone(),
                        });
                    }
                    Ok(fx)
                }),
            Err(inspect_provider::ProviderError::AtCapacity(why)) => {
                let now = now_ms();
                let fx = engine.spawn_waiting(&ticket.sandbox_id, &why, now);
                self.join_waiters(now).await;
                fx
            }
            Err(e) => engine.spawn_failed_as(
                &ticket.sandbox_id,
                &e.to_string(),
                e.is_transient(),
                now_ms(),
            ),
        };
        if let Ok(fx) = fx {
            self.apply(fx);
        }
        self.schedule().await;
        true
    }

    /// The image a sandbox with nothing of its own starts from: the newest ready one of the
    /// session's environment (or its only repository) made by the provider's runtime (asked
    /// into `runtime` when there are images and it is not known yet; none when it cannot
    /// say) for the session's repositories. Images skipped are said on the timeline.
    async fn prebuilt_image(
        &self,
        state: &SessionState,
        provider: &ViaBinding<'_>,
        runtime: &mut String,
        ready: ImagesRead,
    ) -> Option<String> {
        use inspect_protocol::images::choose_image;
        let ready = match ready {
            Ok(r) => r,
            Err(e) => {
                self.log(LogLine::warn("sandbox", "images_unreadable").detail(e.message));
                return None;
            }
        };
        if ready.is_empty() {
            return None;
        }
        if runtime.is_empty() {
            *runtime = provider.runtime_version().await.unwrap_or_default();
            if runtime.is_empty() {
                return None;
            }
        }
        let repositories = owner_names(state);
        let (chosen, warnings) = choose_image(&ready, runtime, &repositories);
        for w in warnings {
            if let Ok(fx) = self
                .engine()
                .sandbox_warning("prebuilt_image", &w, now_ms())
            {
                self.apply(fx);
            }
        }
        let chosen = chosen?;
        self.log(
            LogLine::info("sandbox", "prebuilt_image_chosen")
                .with("image", chosen.image_id.clone())
                .with("build", chosen.id.as_str()),
        );
        chosen.image_id.clone()
    }

    /// A fresh spawn's reads: the ready images of the session's scope (its environment, or
    /// its only repository; `None` when it has neither) and its sandbox's secrets, in one D1
    /// batch. The secrets are `None` when they are to be read on their own (no sealing key,
    /// no image scope, or the batch failed).
    async fn images_and_secrets(
        &self,
        state: &SessionState,
    ) -> (Option<ImagesRead>, Option<SecretsOpened>) {
        use inspect_protocol::images::{BuildStatus, ImageScope};
        let scope = match (&state.environment_id, state.repositories.as_slice()) {
            (Some(id), _) => ImageScope::Environment {
                environment_id: id.clone(),
            },
            (None, [only]) => ImageScope::Repository {
                owner: only.owner.clone(),
                name: only.name.clone(),
            },
            _ => return (None, None),
        };
        let status = Some(BuildStatus::Ready);
        let repositories = owner_names(state);
        let environment = state.environment_id.as_deref();
        let secrets = match crate::sealed::SecretsRead::new(&self.env, environment, &repositories) {
            Ok(Some(read)) => read,
            _ => {
                let ready = crate::images::builds(&self.env, &scope, status, 10).await;
                return (Some(ready), None);
            }
        };
        let (sql, args) = crate::images::builds_query(&scope, status, 10);
        // The index write a prompt asked for rides along, after the reads.
        let index = self.take_held_index();
        let carried = !index.is_empty();
        let mut batch = vec![
            (sql.as_str(), args.as_slice()),
            (&secrets.sql, &secrets.args),
        ];
        batch.extend(index.iter().map(|(sql, args)| (*sql, args.as_slice())));
        let results = inspect_runtime::d1::query_batch(&self.env, &batch).await;
        if carried {
            if let Err(e) = &results {
                self.log(LogLine::error("session", "index_update_failed").detail(&e.message));
            }
            self.index_carried(results.is_ok());
        }
        match results {
            Ok(results) => {
                use inspect_runtime::d1::batch_rows;
                let ready = batch_rows::<crate::images::BuildRow>(&results, 0);
                let opened = batch_rows::<crate::sealed::SecretRow>(&results, 1);
                let ready = ready.map(|rows| rows.into_iter().map(Into::into).collect());
                (Some(ready), Some(secrets.open(opened)))
            }
            Err(e) => (Some(Err(e)), None),
        }
    }

    /// The secrets the sandbox gets, read and opened at spawn time so a change applies to
    /// the next sandbox (and the set-up-only ones again when it connects to boot).
    pub(super) async fn sandbox_secrets(
        &self,
    ) -> std::result::Result<inspect_secrets::Layered, ApiError> {
        self.secrets_for(&self.engine().state()?).await
    }

    /// [`Self::sandbox_secrets`] of the session as `state` has it.
    async fn secrets_for(
        &self,
        state: &SessionState,
    ) -> std::result::Result<inspect_secrets::Layered, ApiError> {
        let repositories = owner_names(state);
        crate::sealed::open_secrets(&self.env, state.environment_id.as_deref(), &repositories).await
    }

    /// Where a person opens one of the sandbox's tunnelled ports: on the local host, behind
    /// its gate, with a short-lived token signed with the host's secret for this sandbox and
    /// port; elsewhere the vendor's URL as it is.
    pub(super) fn port_link(
        &self,
        port: &str,
        now_ms: i64,
    ) -> std::result::Result<inspect_protocol::session::PortLink, ApiError> {
        let port: u16 = port
            .parse()
            .map_err(|_| ApiError::bad_request(format!("{port:?} is not a port")))?;
        let engine = self.engine();
        let live = engine
            .sandbox_row()?
            .filter(|r| crate::engine::sandbox::LIVE_STATES.contains(&r.status.as_str()));
        let Some(sandbox) = live else {
            return Err(ApiError::conflict("the session's sandbox is not running"));
        };
        let Some(url) = engine.tunnel_urls()?.remove(&port.to_string()) else {
            return Err(ApiError::not_found(format!(
                "port {port} is not tunnelled in this session"
            )));
        };
        Ok(self.gated_link(&sandbox.sandbox_id, port, url, now_ms))
    }

    /// The link a person opens a sandbox's port (or its editor) with: where the provider's
    /// gate checks a token (the local host's), one signed for this sandbox and port that
    /// expires soon; elsewhere the provider's URL as it is.
    pub(super) fn gated_link(
        &self,
        sandbox_id: &str,
        port: u16,
        url: String,
        now_ms: i64,
    ) -> inspect_protocol::session::PortLink {
        let local = self.provider().map(|p| p.kind()) == Some(ProviderKind::Local);
        let secret = match local {
            true => inspect_runtime::setting(&self.env, "SANDBOX_HOST_SECRET"),
            false => self.sandbox_gate_key(sandbox_id),
        };
        match secret {
            Some(secret) => {
                let expires = (now_ms / 1000) as u64 + inspect_ports::LINK_TTL_SECS;
                let token = inspect_ports::sign(
                    secret.as_bytes(),
                    inspect_ports::Kind::Link,
                    sandbox_id,
                    port,
                    expires,
                );
                inspect_protocol::session::PortLink {
                    port,
                    url: format!(
                        "{}/?{}={token}",
                        url.trim_end_matches('/'),
                        inspect_ports::LINK_PARAM
                    ),
                    gated: true,
                    expires_at: Some(expires as i64),
                }
            }
            None => inspect_protocol::session::PortLink {
                port,
                url,
                gated: false,
                expires_at: None,
            },
        }
    }

    /// Signs a long-running sandbox's links anew where the vendor's expire (its ports as
    /// it started with them, the editor's and the desktop's), and keeps and tells the new ones; a port
    /// opened later keeps its link until the next start.
    pub(super) async fn refresh_links(&self, sandbox_id: &str) {
        let Some(provider) = self.provider() else {
            return;
        };
        let engine = self.engine();
        let Ok(settings) = engine.sandbox_settings() else {
            return;
        };
        let gated = self.sandbox_gate_key(sandbox_id).is_some();
        let ports =
            inspect_protocol::provider::vendor_ports(sandbox_id, &settings.tunnel_ports, gated);
        let fresh = match provider
            .refresh_links(&self.sandbox_at(sandbox_id), &ports)
            .await
        {
            Ok(Some(fresh)) => fresh,
            Ok(None) => return,
            Err(e) => {
                self.log(
                    LogLine::warn("sandbox", "links_not_refreshed")
                        .sandbox(sandbox_id)
                        .detail(e.to_string()),
                );
                return;
            }
        };
        let seen = match gated {
            true => inspect_protocol::provider::ungated(sandbox_id, &settings.tunnel_ports, &fresh),
            false => inspect_protocol::provider::Ungated {
                apps: fresh,
                ..Default::default()
            },
        };
        let fx = engine.tunnel_urls().and_then(|mut all| {
            all.extend(seen.apps);
            let fx = engine.set_tunnel_urls(sandbox_id, &all)?;
            engine.set_editor(sandbox_id, seen.editor.as_ref())?;
            engine.set_desktop(sandbox_id, seen.desktop.as_ref())?;
            Ok(fx)
        });
        match fx {
            Ok(fx) => self.carry_out(fx).await,
            Err(e) => self.log(
                LogLine::error("sandbox", "links_not_kept")
                    .sandbox(sandbox_id)
                    .detail(e),
            ),
        }
    }

    /// The key a cloud vendor's sandbox's gates check with (derived from the deployment's
    /// secrets key for that sandbox); none on the local host, whose own gates use its
    /// secret, nor without a secrets key.
    pub(super) fn sandbox_gate_key(&self, sandbox_id: &str) -> Option<String> {
        if matches!(
            self.provider().map(|p| p.kind()),
            None | Some(ProviderKind::Local)
        ) {
            return None;
        }
        let secret = inspect_runtime::setting(&self.env, inspect_secrets::KEY_VAR)?;
        Some(inspect_ports::sandbox_key(secret.as_bytes(), sandbox_id))
    }

    /// The provider the settings choose, asked through the providers Worker.
    pub(super) fn provider(&self) -> Option<ViaBinding<'_>> {
        ViaBinding::chosen(&self.env).ok()
    }

    pub(super) fn spawn_request(
        &self,
        state: &SessionState,
        ticket: &crate::engine::sandbox::SpawnTicket,
        restore_from: Option<String>,
        boot_mode: inspect_protocol::provider::BootMode,
    ) -> std::result::Result<inspect_protocol::provider::SpawnRequest, ApiError> {
        let (origin, settings, mcp_servers) = self.engine().spawn_inputs()?;
        let origin =
            origin.ok_or_else(|| ApiError::internal("the control plane's origin is unknown"))?;
        let repositories = state
            .repositories
            .iter()
            .map(|r| {
                let source = r.source.clone().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "repository {}/{} has no clone source",
                        r.owner, r.name
                    ))
                })?;
                Ok(inspect_protocol::provider::WorkspaceRepository {
                    owner: r.owner.clone(),
                    name: r.name.clone(),
                    source,
                    base_branch: r.branch.clone(),
                })
            })
            .collect::<std::result::Result<Vec<_>, ApiError>>()?;
        let default_model = state
            .model
            .clone()
            .or_else(|| self.env.var("DEFAULT_MODEL").ok().map(|v| v.to_string()));
        Ok(inspect_protocol::provider::SpawnRequest {
            setup_secrets: Vec::new(),
            session_id: state.id.clone(),
            sandbox_id: ticket.sandbox_id.clone(),
            sandbox_token: ticket.token.clone(),
            control_plane_url: origin,
            repositories,
            work_branch: state
                .branch_name
                .clone()
                .unwrap_or_else(|| format!("open-inspect/{}", state.id)),
            boot_mode,
            restore_from,
            env: Default::default(),
            tunnel_ports: settings.tunnel_ports,
            default_model,
            models: Vec::new(),
            skills: state.skills.clone(),
            mcp_servers,
            agent: state.agent,
            managed_grants: settings.managed_grants,
            egress: settings.egress,
        })
    }

    pub(super) fn accept_client_socket(&self) -> Result<Response> {
        if let Err(e) = self.session_id() {
            return json_error(&e);
        }
        let pair = WebSocketPair::new()?;
        let id = ids::new_id("ws");
        self.state
            .accept_websocket_with_tags(&pair.server, &[KIND_CLIENT, id.as_str()]);
        pair.server.serialize_attachment(SocketTag {
            id: id.clone(),
            kind: KIND_CLIENT.into(),
        })?;
        if let Err(e) = self.engine().socket_opened(&id, KIND_CLIENT, now_ms()) {
            let _ = pair.server.close(Some(1011), Some(e.message.as_str()));
        }
        self.with_registry(|r| r.sockets.insert(id, pair.server));
        Response::from_websocket(pair.client)
    }
}
