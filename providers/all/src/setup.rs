//! Which provider the settings choose, each vendor's settings read and checked.

/// Every provider `SANDBOX_PROVIDER` may name.
pub const PROVIDER_NAMES: [&str; 7] = [
    "local",
    "modal",
    "daytona",
    "e2b",
    "vercel",
    "opencomputer",
    "kubernetes",
];

/// The provider the settings choose, with its own settings read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderSetup {
    /// `inspect-supervisor host` (`SANDBOX_HOST_URL`, `SANDBOX_HOST_SECRET`).
    Local {
        base_url: String,
        secret: String,
    },
    Kubernetes(Box<inspect_kubernetes::KubeConfig>),
    Modal(inspect_modal::ModalConfig),
    Daytona(inspect_daytona::DaytonaConfig),
    E2b(inspect_e2b::E2bConfig),
    Vercel(inspect_vercel::VercelConfig),
    OpenComputer(inspect_opencomputer::OpenComputerConfig),
}

/// How long a sandbox has to become ready (`SANDBOX_READY_TIMEOUT_SECONDS`, 30–3600): by
/// default 120 s, and 600 s on Kubernetes, where a claim is provisioned and attached and an
/// image pulled on a node that may itself be on its way. A value out of range is the
/// default.
pub fn ready_timeout_seconds(get: impl Fn(&str) -> Option<String>) -> i64 {
    let default = match get("SANDBOX_PROVIDER").as_deref().map(str::trim) {
        Some("kubernetes") => 600,
        _ => 120,
    };
    get("SANDBOX_READY_TIMEOUT_SECONDS")
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|s| (30..=3600).contains(s))
        .unwrap_or(default)
}

/// Reads `SANDBOX_PROVIDER` (default `local`) and that provider's settings through `get`.
/// The error says, in words, what to set.
pub fn provider_setup(get: impl Fn(&str) -> Option<String>) -> Result<ProviderSetup, String> {
    let get = |n: &str| get(n).filter(|v| !v.trim().is_empty());
    let name = get("SANDBOX_PROVIDER").unwrap_or_else(|| "local".into());
    let name = name.trim().to_ascii_lowercase();
    match name.as_str() {
        "local" => match (get("SANDBOX_HOST_URL"), get("SANDBOX_HOST_SECRET")) {
            (Some(base_url), Some(secret)) => Ok(ProviderSetup::Local { base_url, secret }),
            (url, _) => Err(format!(
                "no sandbox provider is configured: the local provider needs {} (or set SANDBOX_PROVIDER, see docs/providers.md)",
                if url.is_none() { "SANDBOX_HOST_URL and SANDBOX_HOST_SECRET" } else { "SANDBOX_HOST_SECRET" }
            )),
        },
        "kubernetes" => inspect_kubernetes::KubeConfig::from_settings(get)
            .map(|c| ProviderSetup::Kubernetes(Box::new(c)))
            .map_err(|e| format!("SANDBOX_PROVIDER=kubernetes: {e} (see docs/providers.md)")),
        "modal" => inspect_modal::ModalConfig::from_settings(get)
            .map(ProviderSetup::Modal)
            .map_err(|e| format!("SANDBOX_PROVIDER=modal: {e} (see docs/providers.md)")),
        "daytona" => inspect_daytona::DaytonaConfig::from_settings(get)
            .map(ProviderSetup::Daytona)
            .map_err(|e| format!("SANDBOX_PROVIDER=daytona: {e} (see docs/providers.md)")),
        "e2b" => inspect_e2b::E2bConfig::from_settings(get)
            .map(ProviderSetup::E2b)
            .map_err(|e| format!("SANDBOX_PROVIDER=e2b: {e} (see docs/providers.md)")),
        "vercel" => inspect_vercel::VercelConfig::from_settings(get)
            .map(ProviderSetup::Vercel)
            .map_err(|e| format!("SANDBOX_PROVIDER=vercel: {e} (see docs/providers.md)")),
        "opencomputer" => inspect_opencomputer::OpenComputerConfig::from_settings(get)
            .map(ProviderSetup::OpenComputer)
            .map_err(|e| format!("SANDBOX_PROVIDER=opencomputer: {e} (see docs/providers.md)")),
        other => Err(format!(
            "SANDBOX_PROVIDER={other} is not a provider; one of: {}",
            PROVIDER_NAMES.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |n: &str| pairs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
    }

    #[test]
    fn the_ready_budget_is_longer_on_kubernetes() {
        assert_eq!(ready_timeout_seconds(settings(&[])), 120);
        let k8s = settings(&[("SANDBOX_PROVIDER", "kubernetes")]);
        assert_eq!(ready_timeout_seconds(k8s), 600);
        let set = settings(&[("SANDBOX_READY_TIMEOUT_SECONDS", "45")]);
        assert_eq!(ready_timeout_seconds(set), 45);
        let out = settings(&[("SANDBOX_READY_TIMEOUT_SECONDS", "5")]);
        assert_eq!(ready_timeout_seconds(out), 120, "out of range");
    }

    #[test]
    fn the_provider_is_chosen_by_settings_and_says_what_is_missing() {
        let local = provider_setup(settings(&[
            ("SANDBOX_HOST_URL", "http://127.0.0.1:8788"),
            ("SANDBOX_HOST_SECRET", "s"),
        ]));
        assert!(matches!(local, Ok(ProviderSetup::Local { .. })));
        let e = provider_setup(settings(&[])).unwrap_err();
        assert!(
            e.contains("SANDBOX_HOST_URL and SANDBOX_HOST_SECRET"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "kubernetes")])).unwrap_err();
        assert!(e.contains("missing K8S_API_URL, K8S_TOKEN"), "{e}");
        let k = provider_setup(settings(&[
            ("SANDBOX_PROVIDER", "Kubernetes"),
            ("K8S_API_URL", "https://k8s.example.com"),
            ("K8S_TOKEN", "t"),
            ("K8S_NAMESPACE", "sandboxes"),
            ("K8S_SANDBOX_IMAGE", "img"),
        ]));
        assert!(matches!(k, Ok(ProviderSetup::Kubernetes(_))));
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "modal")])).unwrap_err();
        assert!(
            e.contains("missing MODAL_WORKSPACE, MODAL_API_SECRET"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "daytona")])).unwrap_err();
        assert!(
            e.contains("missing DAYTONA_API_KEY, DAYTONA_SNAPSHOT"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "e2b")])).unwrap_err();
        assert!(e.contains("missing E2B_API_KEY, E2B_TEMPLATE_ID"), "{e}");
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "vercel")])).unwrap_err();
        assert!(
            e.starts_with("SANDBOX_PROVIDER=vercel: missing VERCEL_TOKEN"),
            "{e}"
        );
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "opencomputer")])).unwrap_err();
        assert!(
            e.contains("missing OPENCOMPUTER_API_KEY, OPENCOMPUTER_TEMPLATE"),
            "{e}"
        );
        let o = provider_setup(settings(&[
            ("SANDBOX_PROVIDER", "opencomputer"),
            ("OPENCOMPUTER_API_KEY", "k"),
            ("OPENCOMPUTER_TEMPLATE", "t"),
        ]));
        assert!(matches!(o, Ok(ProviderSetup::OpenComputer(_))));
        let e = provider_setup(settings(&[("SANDBOX_PROVIDER", "lambda")])).unwrap_err();
        assert!(
            e.contains("not a provider") && e.contains("kubernetes"),
            "{e}"
        );
    }
}
