//! Which provider the settings choose, each vendor's settings read and checked.

use inspect_protocol::provider::ProviderKind;

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

/// Reads `SANDBOX_PROVIDER` (default `local`) and that provider's settings through `get`.
/// The error says, in words, what to set.
pub fn provider_setup(get: impl Fn(&str) -> Option<String>) -> Result<ProviderSetup, String> {
    let get = |n: &str| get(n).filter(|v| !v.trim().is_empty());
    let kind = ProviderKind::chosen(get("SANDBOX_PROVIDER").as_deref())?;
    match kind {
        ProviderKind::Local => match (get("SANDBOX_HOST_URL"), get("SANDBOX_HOST_SECRET")) {
            (Some(base_url), Some(secret)) => Ok(ProviderSetup::Local { base_url, secret }),
            (url, _) => Err(format!(
                "no sandbox provider is configured: the local provider needs {} (or set SANDBOX_PROVIDER, see docs/providers.md)",
                if url.is_none() { "SANDBOX_HOST_URL and SANDBOX_HOST_SECRET" } else { "SANDBOX_HOST_SECRET" }
            )),
        },
        ProviderKind::Kubernetes => inspect_kubernetes::KubeConfig::from_settings(get)
            .map(|c| ProviderSetup::Kubernetes(Box::new(c)))
            .map_err(|e| format!("SANDBOX_PROVIDER=kubernetes: {e} (see docs/providers.md)")),
        ProviderKind::Modal => inspect_modal::ModalConfig::from_settings(get)
            .map(ProviderSetup::Modal)
            .map_err(|e| format!("SANDBOX_PROVIDER=modal: {e} (see docs/providers.md)")),
        ProviderKind::Daytona => inspect_daytona::DaytonaConfig::from_settings(get)
            .map(ProviderSetup::Daytona)
            .map_err(|e| format!("SANDBOX_PROVIDER=daytona: {e} (see docs/providers.md)")),
        ProviderKind::E2b => inspect_e2b::E2bConfig::from_settings(get)
            .map(ProviderSetup::E2b)
            .map_err(|e| format!("SANDBOX_PROVIDER=e2b: {e} (see docs/providers.md)")),
        ProviderKind::Vercel => inspect_vercel::VercelConfig::from_settings(get)
            .map(ProviderSetup::Vercel)
            .map_err(|e| format!("SANDBOX_PROVIDER=vercel: {e} (see docs/providers.md)")),
        ProviderKind::OpenComputer => inspect_opencomputer::OpenComputerConfig::from_settings(get)
            .map(ProviderSetup::OpenComputer)
            .map_err(|e| format!("SANDBOX_PROVIDER=opencomputer: {e} (see docs/providers.md)")),
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
