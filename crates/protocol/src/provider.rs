//! What the control plane asks of a sandbox provider, and the local provider's HTTP API
//! (`inspect-supervisor host`: `POST /sandboxes`, `GET /sandboxes/:id`,
//! `DELETE /sandboxes/:id`, `Authorization: Bearer <shared secret>`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a sandbox boots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BootMode {
    /// Clone everything, run setup.
    #[default]
    Fresh,
    /// From a snapshot: fetch + reset, no setup.
    SnapshotRestore,
    /// From a prebuilt image: fetch + reset, no setup.
    Prebuilt,
    /// Building an image: setup failures are fatal.
    Build,
    /// The stopped sandbox's own workspace, kept by the provider: no git changes, no setup.
    Resume,
}

/// One repository to put in the workspace, in position order (the first is primary).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceRepository {
    pub owner: String,
    pub name: String,
    /// Where to clone from: a local path or a git URL, set by the control plane only.
    pub source: String,
    /// The base branch (the source's default when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_branch: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SpawnRequest {
    pub session_id: String,
    pub sandbox_id: String,
    /// The sandbox's bearer token for the session socket. Never logged.
    pub sandbox_token: String,
    /// Where the supervisor connects (`<url>/sessions/<id>/ws?type=sandbox`).
    pub control_plane_url: String,
    pub repositories: Vec<WorkspaceRepository>,
    /// The branch the agent works on, in every repository.
    pub work_branch: String,
    #[serde(default)]
    pub boot_mode: BootMode,
    /// Secrets and settings for the sandbox's environment. Never logged.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The names of the set-up-only secrets: their values come over the session socket
    /// (`SandboxCommand::SetupSecrets`), for the set-up and start hooks alone, never into
    /// any process's environment from the start nor any file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_secrets: Vec<String>,
    /// Ports to expose; their URLs reach the sandbox through `.tunnels.env`.
    #[serde(default)]
    pub tunnel_ports: Vec<u16>,
    /// The model the agent uses unless a prompt says otherwise (`provider/model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_model: Option<String>,
    /// The deployment's OpenAI-compatible server's enabled models (`inspect/<model>`, each
    /// with the efforts it accepts): the agent knows each, so a prompt may switch to any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<crate::models::ModelInfo>,
    /// The managed skill revisions to install before the agent starts (fetched with the
    /// sandbox's credentials from `GET /sessions/:id/skills`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<crate::skills::PinnedSkill>,
    /// The MCP servers the agent is given (secret references unresolved: the supervisor
    /// resolves them from its environment).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mcp_servers: Vec<crate::mcp::SessionMcpServer>,
    /// The coding agent to run.
    #[serde(default)]
    pub agent: crate::session::AgentKind,
    /// Brokered model grants: the agent gets a marker for each, the supervisor a
    /// short-lived token when the agent calls the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_grants: Vec<crate::models::ManagedGrant>,
    /// Start from this snapshot (with `bootMode: snapshot_restore`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore_from: Option<String>,
    /// Where the sandbox's traffic may go (its environment's policy; none: open).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<crate::egress::EgressPolicy>,
}

/// The variables a provider sets for the supervisor (`inspect-supervisor run`); a session
/// secret of the same name never replaces them.
pub const SANDBOX_SYSTEM_VARS: [&str; 8] = [
    "INSPECT_SPAWN",
    "INSPECT_SANDBOX_TOKEN",
    "INSPECT_SESSION_ID",
    "INSPECT_SANDBOX_ID",
    "INSPECT_CONTROL_PLANE_URL",
    "INSPECT_SANDBOX_ROOT",
    "INSPECT_WORKSPACE",
    "HOME",
];

/// A file in the sandbox root that may hand the supervisor its token instead of the
/// environment (the local host writes it, mode 0600): `inspect-supervisor run` reads it and
/// removes it before it starts anything, so no parent process keeps the token in an
/// environment the agent could read.
pub const SANDBOX_TOKEN_FILE: &str = ".sandbox-token";

/// Where the sandbox image keeps the workspace, its home and the agent's state.
pub const SANDBOX_ROOT: &str = "/sandbox";

/// The shell command that starts the supervisor on a provider's machine that is started
/// by running a command in it (E2B, Vercel, OpenComputer): in the background, logging to
/// the sandbox root, at most one at a time (a second start while one runs does nothing, so
/// starting again after a resume is always safe: see [`SUPERVISOR_LOCK_FILE`]). The environment comes from the machine
/// (given when it was created); the command holds no secret, as providers log commands.
/// The supervisor holds its lock itself (`.supervisor.lock`): no `flock` parent stays
/// behind with the sandbox token in its environment, and the shell exits at once.
pub const SUPERVISOR_START: &str = "mkdir -p \"$INSPECT_SANDBOX_ROOT\" && cd \"$INSPECT_SANDBOX_ROOT\" && { nohup inspect-supervisor run >>\"$INSPECT_SANDBOX_ROOT/supervisor.log\" 2>&1 & }";

/// The lock file in the sandbox root that keeps a second `inspect-supervisor run` from
/// starting while one runs.
pub const SUPERVISOR_LOCK_FILE: &str = ".supervisor.lock";

/// Whether the supervisor is up after [`SUPERVISOR_START`] (which backgrounds it and so
/// succeeds whatever becomes of it): its lock is held within 20 s (exit 0), else the end
/// of its log is printed and the check fails. For providers whose start is a command.
pub const SUPERVISOR_UP_CHECK: &str = "cd \"$INSPECT_SANDBOX_ROOT\" || exit 3; i=0; while [ $i -lt 80 ]; do flock -n -E 75 .supervisor.lock true 2>/dev/null; [ $? = 75 ] && exit 0; i=$((i+1)); sleep 0.25; done; echo 'the supervisor is not running; the end of its log:'; tail -c 1500 supervisor.log 2>/dev/null; exit 1";

/// A cloud vendor's sandbox keeps its ports behind gates the supervisor runs: the key the
/// gates check links and cookies with (derived for the one sandbox by the control plane)
/// travels in the sandbox's environment under this name. A sandbox with it is "gated".
pub const GATE_KEY_VAR: &str = "INSPECT_GATE_KEY";
/// Where a gated sandbox's gates listen: the vendor exposes, for the `i`-th tunnelled port,
/// the gate on `base + i` (never the app's own port), the editor's gate on `base + 11`, and
/// the desktop's two (view-only, with control) on `base + 12` and `base + 13`.
/// The block of 14 ports is chosen by the sandbox's id, so sandboxes that share a network
/// (as the test fakes' do) seldom meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GatePorts {
    base: u16,
}

impl GatePorts {
    pub fn of(sandbox_id: &str) -> GatePorts {
        // FNV-1a: small, stable across builds and machines.
        let hash = sandbox_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        });
        GatePorts {
            base: 40_000 + (hash % 1_700) as u16 * 14,
        }
    }

    /// The gate in front of the `i`-th tunnelled (or later asked-for) port.
    pub fn app(self, i: usize) -> Option<u16> {
        (i < crate::limits::MAX_TUNNEL_PORTS).then(|| self.base + i as u16)
    }

    /// The editor's gate.
    pub fn editor(self) -> u16 {
        self.base + 11
    }

    /// The desktop's gate: the view-only server's, or the one with control.
    pub fn desktop(self, control: bool) -> u16 {
        self.base + 12 + u16::from(control)
    }

    /// The sandbox's own services behind gates: (the port in the sandbox, its gate).
    pub fn services(self) -> [(u16, u16); 3] {
        use crate::desktop::{DESKTOP_CONTROL_PORT, DESKTOP_VIEW_PORT};
        [
            (crate::editor::EDITOR_PORT, self.editor()),
            (DESKTOP_VIEW_PORT, self.desktop(false)),
            (DESKTOP_CONTROL_PORT, self.desktop(true)),
        ]
    }
}

/// A gated sandbox's URLs as the session keeps them: its apps' keyed by the app's port,
/// its editor's and its desktop's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ungated {
    pub apps: BTreeMap<String, String>,
    pub editor: Option<crate::editor::EditorEndpoint>,
    pub desktop: Option<crate::desktop::DesktopEndpoints>,
}

/// A vendor's URLs for a gated sandbox's exposed ports, as the session keeps them: keyed by
/// the app's port (`ports`, in the order their gates were numbered), the editor's and the
/// desktop's.
pub fn ungated(sandbox_id: &str, ports: &[u16], urls: &BTreeMap<String, String>) -> Ungated {
    use crate::editor::EditorEndpoint;
    let gates = GatePorts::of(sandbox_id);
    let apps = ports
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let gate = gates.app(i)?;
            Some((p.to_string(), urls.get(&gate.to_string())?.clone()))
        })
        .collect();
    let [editor, view, control] = gates.services().map(|(port, gate)| {
        urls.get(&gate.to_string()).map(|url| EditorEndpoint {
            port,
            url: url.clone(),
        })
    });
    let desktop = view
        .zip(control)
        .map(|(view, control)| crate::desktop::DesktopEndpoints { view, control });
    Ungated {
        apps,
        editor,
        desktop,
    }
}

/// The ports a vendor exposes for a sandbox that tunnels `tunnel_ports`: a gated
/// sandbox's gates (one per tunnelled port, the editor's and the desktop's), else the
/// ports themselves.
pub fn vendor_ports(sandbox_id: &str, tunnel_ports: &[u16], gated: bool) -> Vec<u16> {
    if !gated {
        return tunnel_ports.to_vec();
    }
    let gates = GatePorts::of(sandbox_id);
    (0..tunnel_ports.len())
        .filter_map(|i| gates.app(i))
        .chain(gates.services().map(|(_, gate)| gate))
        .collect()
}

impl SpawnRequest {
    /// What the sandbox needs to reach whatever its egress policy: the control plane, the
    /// repositories' git host, the model's servers (the settings it is given, its model's
    /// vendor and those of its grants).
    pub fn reach(&self) -> crate::egress::Reach {
        use crate::egress::{model_hosts, Reach, MODEL_URL_VARS};
        let mut reach = Reach::default();
        reach.add_url(&self.control_plane_url);
        for r in &self.repositories {
            reach.add_url(&r.source);
        }
        for var in MODEL_URL_VARS {
            if let Some(url) = self.env.get(*var) {
                reach.add_url(url);
            }
        }
        let providers = self
            .default_model
            .iter()
            .filter_map(|m| m.split_once('/').map(|(p, _)| p))
            .chain(self.managed_grants.iter().map(|g| g.provider.as_str()));
        for provider in providers {
            for host in model_hosts(provider) {
                reach.add_url(&format!("https://{host}"));
            }
        }
        reach
    }

    /// Whether the sandbox keeps its ports behind gates (it carries a gate key).
    pub fn gated(&self) -> bool {
        self.env.contains_key(GATE_KEY_VAR)
    }

    /// The ports the vendor exposes: a gated sandbox's gates (one per tunnelled port, and
    /// the editor's), else the tunnelled ports themselves.
    pub fn vendor_ports(&self) -> Vec<u16> {
        vendor_ports(&self.sandbox_id, &self.tunnel_ports, self.gated())
    }

    /// The supervisor's environment on a machine whose sandbox root is `root`: the
    /// session's secrets and settings, then the system variables, which no secret replaces.
    pub fn supervisor_env(&self, root: &str) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = self
            .env
            .iter()
            .filter(|(k, _)| !SANDBOX_SYSTEM_VARS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        for (k, v) in [
            ("INSPECT_SPAWN", self.description()),
            ("INSPECT_SANDBOX_TOKEN", self.sandbox_token.clone()),
            ("INSPECT_SESSION_ID", self.session_id.clone()),
            ("INSPECT_SANDBOX_ID", self.sandbox_id.clone()),
            ("INSPECT_CONTROL_PLANE_URL", self.control_plane_url.clone()),
            ("INSPECT_SANDBOX_ROOT", root.to_owned()),
            ("INSPECT_WORKSPACE", format!("{root}/workspace")),
            ("HOME", format!("{root}/home")),
        ] {
            env.insert(k.into(), v);
        }
        env
    }

    /// `INSPECT_SPAWN`: the request without its token and secrets, which travel apart.
    pub fn description(&self) -> String {
        let mut described = self.clone();
        described.sandbox_token = String::new();
        described.env.clear();
        serde_json::to_string(&described).unwrap_or_default()
    }
}

/// A saved sandbox filesystem, and the runtime that made it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SnapshotInfo {
    pub snapshot_id: String,
    pub sandbox_id: String,
    /// Snapshots restore only into the runtime version that made them.
    pub runtime_version: String,
    pub bytes: u64,
    pub duration_ms: u64,
    /// The session whose sandbox it is (what deleting the session removes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `DELETE /sessions/:id` on the local sandbox host: what was removed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SessionRemoved {
    pub sandboxes: usize,
    pub snapshots: usize,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    pub sandbox_id: String,
    pub session_id: String,
    /// `running`, `exited`, `stopped`.
    pub status: String,
    /// The runtime the sandbox runs (what its snapshots will be tagged with).
    #[serde(default)]
    pub runtime_version: String,
    #[serde(default)]
    pub tunnel_urls: BTreeMap<String, String>,
    /// What the provider says of a sandbox that is not running (why it ended, why it cannot
    /// start), in its words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The vendor's own id for the sandbox, where the vendor names sandboxes itself: the
    /// session keeps it and addresses the sandbox by it (a vendor's list may not carry our
    /// ids, nor list a stopped sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<String>,
    /// Where the sandbox's editor is reached, when the provider exposes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub editor: Option<crate::editor::EditorEndpoint>,
    /// Where the sandbox's desktop is reached, when the provider exposes one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desktop: Option<crate::desktop::DesktopEndpoints>,
}

/// A sandbox as a provider is asked about it: our id, and the vendor's id the provider
/// gave when it made or resumed it (none for sandboxes from before it was kept, and for
/// vendors that take our id).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxRef {
    pub sandbox_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor_id: Option<String>,
}

impl SandboxRef {
    /// A sandbox known only by our id.
    pub fn ours(sandbox_id: &str) -> SandboxRef {
        SandboxRef {
            sandbox_id: sandbox_id.to_owned(),
            vendor_id: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct SandboxList {
    pub sandboxes: Vec<SandboxInfo>,
}

/// What a provider can do; decisions about resume, restore and respawn read these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct Capabilities {
    pub snapshots: bool,
    pub restore: bool,
    pub persistent_resume: bool,
    pub explicit_stop: bool,
    pub timeouts: bool,
    /// Resuming starts the same machine again, which keeps the identity (sandbox id and
    /// token) it was created with; otherwise a resumed sandbox gets a new identity.
    #[serde(default)]
    pub resume_in_place: bool,
    /// Taking a snapshot ends the sandbox (Vercel): snapshots only when it stops.
    #[serde(default)]
    pub snapshot_ends_sandbox: bool,
    /// It can hold a sandbox to an environment's `off` egress policy (its own network
    /// controls, or ours); a provider that cannot is refused such a sandbox.
    #[serde(default)]
    pub confines_egress: bool,
}

/// The sandbox providers `SANDBOX_PROVIDER` may name, each with what it can do. Both
/// Workers read the kind; only the control plane's holds the vendors' clients and keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProviderKind {
    Local,
    Kubernetes,
    Modal,
    Daytona,
    E2b,
    Vercel,
    OpenComputer,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 7] = [
        ProviderKind::Local,
        ProviderKind::Modal,
        ProviderKind::Daytona,
        ProviderKind::E2b,
        ProviderKind::Vercel,
        ProviderKind::OpenComputer,
        ProviderKind::Kubernetes,
    ];

    /// Its name in `SANDBOX_PROVIDER`.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Kubernetes => "kubernetes",
            ProviderKind::Modal => "modal",
            ProviderKind::Daytona => "daytona",
            ProviderKind::E2b => "e2b",
            ProviderKind::Vercel => "vercel",
            ProviderKind::OpenComputer => "opencomputer",
        }
    }

    /// The kind `SANDBOX_PROVIDER` names (any case, spaces around ignored; unset or empty
    /// is `local`), or in words what it may name.
    pub fn chosen(setting: Option<&str>) -> Result<ProviderKind, String> {
        let name = setting
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .unwrap_or("local")
            .to_ascii_lowercase();
        ProviderKind::ALL
            .into_iter()
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.name()).collect();
                format!(
                    "SANDBOX_PROVIDER={name} is not a provider; one of: {}",
                    names.join(", ")
                )
            })
    }

    /// What sandboxes of this kind can do (the same whatever the vendor's settings).
    pub fn capabilities(self) -> Capabilities {
        let mut c = Capabilities {
            explicit_stop: true,
            ..Capabilities::default()
        };
        match self {
            ProviderKind::Local => {
                c.snapshots = true;
                c.restore = true;
                c.confines_egress = true;
            }
            ProviderKind::Kubernetes => {
                c.persistent_resume = true;
                c.timeouts = true;
                c.confines_egress = true;
            }
            ProviderKind::Modal => {
                c.snapshots = true;
                c.restore = true;
                c.timeouts = true;
            }
            ProviderKind::Daytona => {
                c.persistent_resume = true;
                c.resume_in_place = true;
            }
            ProviderKind::E2b => {
                c.persistent_resume = true;
                c.timeouts = true;
                c.resume_in_place = true;
                c.confines_egress = true;
            }
            ProviderKind::Vercel => {
                c.snapshots = true;
                c.restore = true;
                c.timeouts = true;
                c.snapshot_ends_sandbox = true;
                c.confines_egress = true;
            }
            ProviderKind::OpenComputer => {
                c.snapshots = true;
                c.restore = true;
                c.persistent_resume = true;
                c.timeouts = true;
                c.resume_in_place = true;
            }
        }
        c
    }

    /// How long a sandbox has to become ready (`SANDBOX_READY_TIMEOUT_SECONDS`, 30–3600,
    /// given as `setting`): by default 120 s, and 600 s on Kubernetes, where a claim is
    /// provisioned and attached and an image pulled on a node that may itself be on its
    /// way. A value out of range is the default.
    pub fn ready_timeout_seconds(self, setting: Option<&str>) -> i64 {
        let default = match self {
            ProviderKind::Kubernetes => 600,
            _ => 120,
        };
        setting
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|s| (30..=3600).contains(s))
            .unwrap_or(default)
    }
}

/// A provider's refusal, classified for what the session does next. It crosses the
/// binding between the two Workers as `{"kind": "transient", "message": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "message", rename_all = "snake_case")]
pub enum ProviderError {
    /// The provider could not be reached or was busy: retrying later may work.
    Transient(String),
    /// The provider refused: retrying the same request will not work.
    Permanent(String),
    /// The provider runs as many sandboxes as it may (or rate-limits): wait, then ask
    /// again. Not a failure of the session's sandbox.
    AtCapacity(String),
}

impl ProviderError {
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ProviderError::Transient(_) | ProviderError::AtCapacity(_)
        )
    }

    /// Classifies an HTTP answer the way every provider's API does.
    pub fn from_status(status: u16, body: &str) -> Self {
        let detail = format!(
            "provider answered {status}: {}",
            body.chars().take(300).collect::<String>()
        );
        if status == 429 {
            ProviderError::AtCapacity(detail)
        } else if status == 408 || status >= 500 {
            ProviderError::Transient(detail)
        } else {
            ProviderError::Permanent(detail)
        }
    }

    /// A vendor API's refusal as the lifecycle takes it (a 404 in the vendor's words too).
    pub fn from_vendor(vendor: &str, failure: crate::vendor::Failure) -> Self {
        use crate::vendor::Failure;
        match failure {
            Failure::NotFound => ProviderError::Permanent(format!("{vendor}: not found")),
            Failure::Transient(m) => ProviderError::Transient(m),
            Failure::Quota(m) => ProviderError::AtCapacity(m),
            Failure::Permanent(m) => ProviderError::Permanent(m),
        }
    }
}

impl std::fmt::Display for ProviderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProviderError::Transient(m) => write!(f, "{m} (transient)"),
            ProviderError::Permanent(m) => write!(f, "{m}"),
            ProviderError::AtCapacity(m) => write!(f, "{m} (at capacity)"),
        }
    }
}

/// What resuming a stopped sandbox came to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", content = "sandbox", rename_all = "snake_case")]
pub enum Resumed {
    /// The stopped sandbox's workspace runs again, as the request's sandbox.
    Started(Box<SandboxInfo>),
    /// Nothing is left to resume (deleted, expired): spawn a fresh one.
    Gone,
}

/// `POST /repositories/check` on the local sandbox host: is this path a git repository a
/// sandbox can clone?
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepositoryCheck {
    pub path: String,
}

/// What the host found: the checked-out branch (when on one) and its head commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct RepositoryChecked {
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    pub head: String,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_says_what_it_can_do_and_how_long_it_may_take() {
        let c = |k: &str| ProviderKind::chosen(Some(k)).unwrap().capabilities();
        assert_eq!(ProviderKind::chosen(None), Ok(ProviderKind::Local));
        assert_eq!(ProviderKind::chosen(Some("  ")), Ok(ProviderKind::Local));
        assert_eq!(ProviderKind::chosen(Some(" E2B ")), Ok(ProviderKind::E2b));
        let e = ProviderKind::chosen(Some("docker")).unwrap_err();
        assert!(e.contains("docker") && e.contains("opencomputer"), "{e}");
        for k in ProviderKind::ALL {
            assert_eq!(ProviderKind::chosen(Some(k.name())), Ok(k));
            assert!(k.capabilities().explicit_stop, "{k:?}");
        }
        // Restoring needs snapshots; resuming in place needs a workspace that stays.
        for k in ProviderKind::ALL {
            let c = k.capabilities();
            assert!(!c.restore || c.snapshots, "{k:?}");
            assert!(!c.resume_in_place || c.persistent_resume, "{k:?}");
        }
        assert!(c("local").snapshots && !c("local").persistent_resume && !c("local").timeouts);
        assert!(c("kubernetes").persistent_resume && !c("kubernetes").resume_in_place);
        assert!(c("daytona").resume_in_place && !c("daytona").timeouts);
        assert!(c("e2b").resume_in_place && c("e2b").timeouts && !c("e2b").snapshots);
        assert!(c("modal").restore && !c("modal").persistent_resume);
        assert!(c("vercel").snapshot_ends_sandbox);
        assert!(!c("opencomputer").snapshot_ends_sandbox && c("opencomputer").resume_in_place);
        let k8s = ProviderKind::Kubernetes;
        assert_eq!(k8s.ready_timeout_seconds(None), 600);
        assert_eq!(ProviderKind::Local.ready_timeout_seconds(None), 120);
        assert_eq!(ProviderKind::Local.ready_timeout_seconds(Some("45")), 45);
        assert_eq!(
            ProviderKind::Local.ready_timeout_seconds(Some("5")),
            120,
            "out of range"
        );
        assert_eq!(k8s.ready_timeout_seconds(Some("x")), 600);
    }

    #[test]
    fn a_refusal_and_a_resume_cross_the_binding_as_they_were() {
        let e = ProviderError::AtCapacity("full".into());
        let text = serde_json::to_string(&e).unwrap();
        assert_eq!(text, r#"{"kind":"at_capacity","message":"full"}"#);
        assert_eq!(serde_json::from_str::<ProviderError>(&text).unwrap(), e);
        let gone = serde_json::to_string(&Resumed::Gone).unwrap();
        assert_eq!(gone, r#"{"outcome":"gone"}"#);
        let r = SandboxRef::ours("sb");
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"sandboxId":"sb"}"#);
    }

    #[test]
    fn a_gated_sandbox_shows_its_gates_and_the_session_keys_them_by_the_apps() {
        let mut req: SpawnRequest = serde_json::from_value(serde_json::json!({
            "sessionId": "s", "sandboxId": "sb", "sandboxToken": "t", "controlPlaneUrl": "http://x",
            "repositories": [], "workBranch": "w", "tunnelPorts": [3000, 8080]
        }))
        .unwrap();
        assert_eq!(req.vendor_ports(), vec![3000, 8080]);
        req.env.insert(GATE_KEY_VAR.into(), "k".into());
        let gates = GatePorts::of("sb");
        let (a, b, e) = (gates.app(0).unwrap(), gates.app(1).unwrap(), gates.editor());
        let (v, c) = (gates.desktop(false), gates.desktop(true));
        assert!((40_000..=63_799).contains(&a) && b == a + 1 && e == a + 11);
        assert!(
            v == a + 12 && c == a + 13,
            "the desktop's two gates end the block"
        );
        assert_eq!(gates.app(10), None, "at most 10 ports");
        assert_ne!(GatePorts::of("sb_2"), gates);
        assert_eq!(req.vendor_ports(), vec![a, b, e, v, c]);
        assert!(
            !req.description().contains("\"k\""),
            "the key is not described"
        );
        let urls: BTreeMap<String, String> = [
            (a, "https://a"),
            (b, "https://b"),
            (e, "https://e"),
            (v, "https://v"),
            (c, "https://c"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let seen = ungated("sb", &[3000, 8080], &urls);
        assert_eq!(seen.apps["3000"], "https://a");
        assert_eq!(seen.apps["8080"], "https://b");
        assert_eq!(seen.apps.len(), 2);
        assert_eq!(seen.editor.unwrap().url, "https://e");
        let desktop = seen.desktop.unwrap();
        assert_eq!(desktop.of(false).url, "https://v");
        assert_eq!(desktop.of(true).url, "https://c");
        assert_eq!(desktop.of(true).port, crate::desktop::DESKTOP_CONTROL_PORT);
        // Any block of 14 stays within the ports there are.
        for id in ["a", "b", "sandbox-with-a-long-name", "zz"] {
            let g = GatePorts::of(id);
            assert!(g.desktop(true) < 63_800 && g.app(0).unwrap() >= 40_000);
        }
    }
}
