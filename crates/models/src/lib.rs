//! The models a deployment offers. The catalog is built in (the vendors' models and the
//! efforts each accepts, which are the agent's variants of that model), plus the models the
//! deployment's own OpenAI-compatible server serves (`COMPATIBLE_MODELS`). What is listed
//! and enabled follows the deployment's keys and its settings; a session's or a prompt's
//! model and effort are checked against it, with the choices named when they are refused.

use inspect_protocol::models::{ModelCatalog, ModelInfo, ModelProvider, ModelSettings};

#[cfg(target_arch = "wasm32")]
pub mod grant_store;
pub mod grants;
#[cfg(target_arch = "wasm32")]
pub mod store;

/// The provider of the deployment's OpenAI-compatible server (`INSPECT_MODEL_BASE_URL` in
/// the sandboxes); its models are the setting `COMPATIBLE_MODELS`.
pub const COMPATIBLE_PROVIDER: &str = "inspect";
/// The efforts a compatible server's model accepts (sent as `reasoning_effort`).
pub const COMPATIBLE_EFFORTS: &[&str] = &["low", "medium", "high"];
/// The context a compatible server's model is given.
pub const COMPATIBLE_CONTEXT: u32 = 128_000;

struct Vendor {
    id: &'static str,
    label: &'static str,
    key: &'static str,
    opt_in: bool,
}

const VENDORS: &[Vendor] = &[
    Vendor {
        id: "anthropic",
        label: "Anthropic",
        key: "ANTHROPIC_API_KEY",
        opt_in: false,
    },
    Vendor {
        id: "openai",
        label: "OpenAI",
        key: "OPENAI_API_KEY",
        opt_in: false,
    },
    Vendor {
        id: "xai",
        label: "xAI",
        key: "XAI_API_KEY",
        opt_in: true,
    },
    Vendor {
        id: "deepseek",
        label: "DeepSeek",
        key: "DEEPSEEK_API_KEY",
        opt_in: true,
    },
];

/// (id, label, context, efforts, default effort)
type Known = (
    &'static str,
    &'static str,
    u32,
    &'static [&'static str],
    Option<&'static str>,
);

const HIGH_MAX: &[&str] = &["high", "max"];
const LOW_TO_MAX: &[&str] = &["low", "medium", "high", "max"];
const LOW_TO_XHIGH_MAX: &[&str] = &["low", "medium", "high", "xhigh", "max"];
const NONE_TO_XHIGH: &[&str] = &["none", "low", "medium", "high", "xhigh"];
const LOW_TO_XHIGH: &[&str] = &["low", "medium", "high", "xhigh"];
const LOW_TO_HIGH: &[&str] = &["low", "medium", "high"];

const KNOWN: &[Known] = &[
    (
        "anthropic/claude-haiku-4-5",
        "Claude Haiku 4.5",
        200_000,
        HIGH_MAX,
        Some("max"),
    ),
    (
        "anthropic/claude-sonnet-4-5",
        "Claude Sonnet 4.5",
        200_000,
        HIGH_MAX,
        Some("max"),
    ),
    (
        "anthropic/claude-sonnet-4-6",
        "Claude Sonnet 4.6",
        200_000,
        LOW_TO_MAX,
        Some("high"),
    ),
    (
        "anthropic/claude-opus-4-5",
        "Claude Opus 4.5",
        200_000,
        HIGH_MAX,
        Some("max"),
    ),
    (
        "anthropic/claude-opus-4-6",
        "Claude Opus 4.6",
        200_000,
        LOW_TO_MAX,
        Some("high"),
    ),
    (
        "anthropic/claude-opus-4-7",
        "Claude Opus 4.7",
        200_000,
        LOW_TO_XHIGH_MAX,
        Some("high"),
    ),
    ("openai/gpt-5.4", "GPT 5.4", 400_000, NONE_TO_XHIGH, None),
    ("openai/gpt-5.5", "GPT 5.5", 400_000, NONE_TO_XHIGH, None),
    (
        "openai/gpt-5.3-codex",
        "GPT 5.3 Codex",
        400_000,
        LOW_TO_XHIGH,
        Some("high"),
    ),
    (
        "xai/grok-4.5",
        "Grok 4.5",
        256_000,
        LOW_TO_HIGH,
        Some("high"),
    ),
    (
        "xai/grok-4.6",
        "Grok 4.6",
        256_000,
        LOW_TO_HIGH,
        Some("high"),
    ),
    (
        "deepseek/deepseek-v4-flash",
        "DeepSeek V4 Flash",
        128_000,
        &[],
        None,
    ),
    (
        "deepseek/deepseek-v4-pro",
        "DeepSeek V4 Pro",
        128_000,
        &[],
        None,
    ),
];

/// What the catalog is made from: the deployment's settings (none until someone saves
/// them), the names of the keys it can give a sandbox (its secrets' names at any scope and
/// the keys its sandboxes carry themselves, `SANDBOX_MODEL_KEYS`), the providers it holds
/// an active model grant for, `COMPATIBLE_MODELS` and `DEFAULT_MODEL`.
#[derive(Debug, Clone, Default)]
pub struct Inputs<'a> {
    pub settings: Option<&'a ModelSettings>,
    pub secret_names: &'a [String],
    pub grant_providers: &'a [String],
    pub compatible: Option<&'a str>,
    pub default_model: Option<&'a str>,
}

/// The compatible server's model ids named by `COMPATIBLE_MODELS` (comma-separated, with or
/// without the `inspect/` prefix) and by `DEFAULT_MODEL` when it is one of its.
fn compatible_ids(inputs: &Inputs) -> Vec<String> {
    let prefix = format!("{COMPATIBLE_PROVIDER}/");
    let mut ids: Vec<String> = Vec::new();
    let named = inputs.compatible.unwrap_or_default().split(',');
    let default = inputs.default_model.filter(|m| m.starts_with(&prefix));
    for raw in named.chain(default) {
        let name = raw.trim().trim_start_matches(&prefix);
        if name.is_empty() || name.len() > 100 || name.chars().any(|c| c.is_control()) {
            continue;
        }
        let id = format!("{prefix}{name}");
        if !ids.contains(&id) {
            ids.push(id);
        }
    }
    ids
}

/// The catalog as the deployment has it now. A vendor's models are offered only when the
/// deployment can reach it (a key or a grant); an opt-in vendor's start disabled.
pub fn catalog(inputs: &Inputs) -> ModelCatalog {
    let has = |v: &Vendor| {
        inputs.secret_names.iter().any(|n| n == v.key)
            || inputs.grant_providers.iter().any(|p| p == v.id)
    };
    let mut providers: Vec<ModelProvider> = VENDORS
        .iter()
        .map(|v| ModelProvider {
            id: v.id.into(),
            label: v.label.into(),
            key_secret: Some(v.key.into()),
            opt_in: v.opt_in,
            configured: has(v),
        })
        .collect();
    let compatible = compatible_ids(inputs);
    if !compatible.is_empty() {
        providers.push(ModelProvider {
            id: COMPATIBLE_PROVIDER.into(),
            label: "OpenAI-compatible server".into(),
            key_secret: None,
            opt_in: false,
            configured: true,
        });
    }
    let listed = |provider: &str| providers.iter().any(|p| p.id == provider && p.configured);
    let mut models: Vec<ModelInfo> = KNOWN
        .iter()
        .map(|(id, label, context, efforts, default_effort)| ModelInfo {
            id: (*id).into(),
            provider: provider_of(id).into(),
            label: (*label).into(),
            context: *context,
            reasoning: !efforts.is_empty(),
            efforts: efforts.iter().map(|e| (*e).to_string()).collect(),
            default_effort: default_effort.map(Into::into),
            enabled: false,
        })
        .filter(|m| listed(&m.provider))
        .collect();
    models.extend(compatible.iter().map(|id| {
        ModelInfo {
            id: id.clone(),
            provider: COMPATIBLE_PROVIDER.into(),
            label: id[COMPATIBLE_PROVIDER.len() + 1..].into(),
            context: COMPATIBLE_CONTEXT,
            reasoning: true,
            efforts: COMPATIBLE_EFFORTS
                .iter()
                .map(|e| (*e).to_string())
                .collect(),
            default_effort: None,
            enabled: false,
        }
    }));
    for m in &mut models {
        m.enabled = match inputs.settings {
            Some(s) => s.enabled.contains(&m.id),
            // Until someone chooses: every listed model but an opt-in provider's.
            None => !providers.iter().any(|p| p.id == m.provider && p.opt_in),
        };
    }
    let enabled = |id: &str| models.iter().any(|m| m.id == id && m.enabled);
    let default_model = inputs
        .settings
        .and_then(|s| s.default_model.as_deref())
        .filter(|m| enabled(m))
        .or(inputs.default_model.filter(|m| enabled(m)))
        .map(Into::into);
    ModelCatalog {
        providers,
        models,
        default_model,
    }
}

fn provider_of(id: &str) -> &str {
    id.split_once('/').map_or(id, |(p, _)| p)
}

fn listing(ids: impl Iterator<Item = String>) -> String {
    let all: Vec<String> = ids.collect();
    match all.is_empty() {
        true => "none".into(),
        false => all.join(", "),
    }
}

/// Checks a model a session, a prompt or a repository's default names: it must be in the
/// catalog and enabled. The error names the enabled models.
pub fn check_model(catalog: &ModelCatalog, model: &str) -> Result<(), String> {
    let choices = || {
        listing(
            catalog
                .models
                .iter()
                .filter(|m| m.enabled)
                .map(|m| m.id.clone()),
        )
    };
    match catalog.models.iter().find(|m| m.id == model) {
        Some(m) if m.enabled => Ok(()),
        Some(_) => Err(format!(
            "the model {model} is disabled in this deployment; the enabled models: {}",
            choices()
        )),
        None => Err(match unreachable(model) {
            Some(why) => format!("{why}; the enabled models: {}", choices()),
            None => format!("unknown model {model:?}; the enabled models: {}", choices()),
        }),
    }
}

/// Why a model the catalog knows is not offered: its vendor cannot be reached (no key, no
/// grant). None for a model nobody knows.
fn unreachable(model: &str) -> Option<String> {
    KNOWN.iter().find(|k| k.0 == model)?;
    let vendor = vendor_of(model)?;
    Some(format!(
        "the model {model} is not offered: this deployment cannot reach {} (store its key as \
         the secret {}, or add a model grant for {})",
        vendor.label, vendor.key, vendor.id
    ))
}

/// What one session can reach: the names of the secrets that flow into its sandbox (and the
/// keys its sandboxes carry themselves), and the providers of the grants it is given.
#[derive(Debug, Clone, Default)]
pub struct Reach<'a> {
    pub secret_names: &'a [String],
    pub grant_providers: &'a [&'a str],
}

fn vendor_of(model: &str) -> Option<&'static Vendor> {
    VENDORS.iter().find(|v| v.id == provider_of(model))
}

/// Whether a model is one of the built-in vendors' (which a session must reach with a key
/// or a grant), rather than the compatible server's or an unknown one.
pub fn needs_reach(model: &str) -> bool {
    vendor_of(model).is_some()
}

/// Checks that a session can reach its model's vendor: the key flows into its sandbox (a
/// global secret, or its repository's or environment's), or a grant it is given serves it.
/// The compatible server and models outside the built-in vendors pass.
pub fn check_reach(model: &str, reach: &Reach) -> Result<(), String> {
    let Some(vendor) = vendor_of(model) else {
        return Ok(());
    };
    let keyed = reach.secret_names.iter().any(|n| n == vendor.key);
    let granted = reach.grant_providers.contains(&vendor.id);
    match keyed || granted {
        true => Ok(()),
        false => Err(format!(
            "this session cannot reach {} for {model}: the secret {} is not set for its \
             repository, its environment or the deployment, and no model grant for {} \
             applies to it{}",
            vendor.label,
            vendor.key,
            vendor.id,
            match vendor.id {
                "anthropic" => " (an Anthropic grant serves Claude Code sessions only)",
                _ => "",
            }
        )),
    }
}

/// Checks a reasoning effort for the model it goes to (`model`, when known). A model the
/// catalog does not hold (a deployment's `DEFAULT_MODEL` outside it) takes the efforts any
/// model accepts.
pub fn check_effort(
    catalog: &ModelCatalog,
    model: Option<&str>,
    effort: &str,
) -> Result<(), String> {
    match model.and_then(|id| catalog.models.iter().find(|m| m.id == id)) {
        Some(m) if m.efforts.iter().any(|e| e == effort) => Ok(()),
        Some(m) if m.efforts.is_empty() => Err(format!(
            "the model {} takes no reasoning effort (asked for {effort:?})",
            m.id
        )),
        Some(m) => Err(format!(
            "the model {} accepts the reasoning efforts {}, not {effort:?}",
            m.id,
            m.efforts.join(", ")
        )),
        None => {
            use inspect_protocol::limits::REASONING_EFFORTS;
            match REASONING_EFFORTS.contains(&effort) {
                true => Ok(()),
                false => Err(format!(
                    "reasoningEffort is one of {}, not {effort:?}",
                    REASONING_EFFORTS.join(", ")
                )),
            }
        }
    }
}

/// Checks settings before they are stored: every enabled model is listed, the default is
/// one of them. The error names what is wrong.
pub fn check_settings(catalog: &ModelCatalog, settings: &ModelSettings) -> Result<(), String> {
    if settings.enabled.len() > 200 {
        return Err("at most 200 enabled models".into());
    }
    for id in &settings.enabled {
        if !catalog.models.iter().any(|m| &m.id == id) {
            if let Some(why) = unreachable(id) {
                return Err(why);
            }
            return Err(format!(
                "unknown model {id:?}; the models: {}",
                listing(catalog.models.iter().map(|m| m.id.clone()))
            ));
        }
    }
    if let Some(d) = &settings.default_model {
        if !settings.enabled.contains(d) {
            return Err(format!(
                "the default model {d} must be one of the enabled models"
            ));
        }
    }
    Ok(())
}

/// The models a sandbox's agent is to know on the compatible server (each with its efforts
/// as variants): the enabled ones.
pub fn compatible_models(catalog: &ModelCatalog) -> Vec<ModelInfo> {
    catalog
        .models
        .iter()
        .filter(|m| m.provider == COMPATIBLE_PROVIDER && m.enabled)
        .cloned()
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn ids(c: &ModelCatalog) -> Vec<&str> {
        c.models.iter().map(|m| m.id.as_str()).collect()
    }

    fn keys(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| (*n).to_string()).collect()
    }

    #[test]
    fn a_vendor_is_offered_once_it_can_be_reached_and_opt_in_ones_start_disabled() {
        // No key and no grant: none of the vendors' models is offered.
        let none = catalog(&Inputs::default());
        assert!(none.models.is_empty(), "{:?}", ids(&none));
        assert!(none.providers.iter().all(|p| !p.configured));
        let why = check_model(&none, "anthropic/claude-sonnet-4-5").unwrap_err();
        assert!(
            why.contains("not offered") && why.contains("ANTHROPIC_API_KEY"),
            "{why}"
        );
        let settings = ModelSettings {
            enabled: vec!["openai/gpt-5.5".into()],
            default_model: None,
        };
        let why = check_settings(&none, &settings).unwrap_err();
        assert!(why.contains("OPENAI_API_KEY"), "{why}");
        // A key (at any scope) or a grant reaches a vendor.
        let names = keys(&["OPENAI_API_KEY", "XAI_API_KEY"]);
        let granted = keys(&["anthropic"]);
        let with = catalog(&Inputs {
            secret_names: &names,
            grant_providers: &granted,
            ..Default::default()
        });
        for id in ["openai/gpt-5.5", "anthropic/claude-sonnet-4-5"] {
            assert!(check_model(&with, id).is_ok(), "{id}");
        }
        let grok = with.models.iter().find(|m| m.id == "xai/grok-4.6").unwrap();
        assert!(!grok.enabled, "opt-in: listed, not enabled");
        assert!(with.providers.iter().any(|p| p.id == "xai" && p.configured));
        assert!(!ids(&with).iter().any(|m| m.starts_with("deepseek/")));
    }

    #[test]
    fn a_session_must_reach_its_models_vendor() {
        let names = keys(&["OPENAI_API_KEY"]);
        let reach = Reach {
            secret_names: &names,
            grant_providers: &[],
        };
        assert!(check_reach("openai/gpt-5.5", &reach).is_ok());
        assert!(check_reach("inspect/fake", &reach).is_ok());
        let why = check_reach("anthropic/claude-opus-4-7", &reach).unwrap_err();
        assert!(
            why.contains("ANTHROPIC_API_KEY") && why.contains("Claude Code"),
            "{why}"
        );
        let granted = Reach {
            secret_names: &[],
            grant_providers: &["anthropic"],
        };
        assert!(check_reach("anthropic/claude-opus-4-7", &granted).is_ok());
    }

    #[test]
    fn the_compatible_server_is_a_provider_of_its_own() {
        let c = catalog(&Inputs {
            compatible: Some("inspect/qwen, llama ,, inspect/qwen"),
            default_model: Some("inspect/fake"),
            ..Default::default()
        });
        let mine: Vec<&str> = ids(&c)
            .into_iter()
            .filter(|m| m.starts_with("inspect/"))
            .collect();
        assert_eq!(mine, ["inspect/qwen", "inspect/llama", "inspect/fake"]);
        assert_eq!(c.default_model.as_deref(), Some("inspect/fake"));
        assert_eq!(compatible_models(&c).len(), 3);
        assert!(catalog(&Inputs::default())
            .providers
            .iter()
            .all(|p| p.id != "inspect"));
    }

    #[test]
    fn settings_choose_what_is_enabled_and_the_default() {
        let s = ModelSettings {
            enabled: vec!["openai/gpt-5.5".into(), "inspect/a".into()],
            default_model: Some("openai/gpt-5.5".into()),
        };
        let names = keys(&["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]);
        let inputs = Inputs {
            settings: Some(&s),
            secret_names: &names,
            compatible: Some("a,b"),
            default_model: Some("anthropic/claude-sonnet-4-5"),
            ..Default::default()
        };
        let c = catalog(&inputs);
        assert_eq!(c.default_model.as_deref(), Some("openai/gpt-5.5"));
        assert!(check_model(&c, "openai/gpt-5.5").is_ok());
        let off = check_model(&c, "anthropic/claude-sonnet-4-5").unwrap_err();
        assert!(
            off.contains("disabled") && off.contains("openai/gpt-5.5, inspect/a"),
            "{off}"
        );
        let unknown = check_model(&c, "nobody/nothing").unwrap_err();
        assert!(unknown.contains("unknown model"), "{unknown}");
        assert_eq!(compatible_models(&c).len(), 1, "only the enabled one");
        assert!(check_settings(&c, &s).is_ok());
        let bad = ModelSettings {
            enabled: vec!["openai/gpt-5.5".into()],
            default_model: Some("inspect/a".into()),
        };
        assert!(check_settings(&c, &bad).unwrap_err().contains("default"));
        let unknown = ModelSettings {
            enabled: vec!["x/y".into()],
            default_model: None,
        };
        assert!(check_settings(&c, &unknown).unwrap_err().contains("x/y"));
        // A default that is no longer enabled falls back to DEFAULT_MODEL, then to none.
        let c = catalog(&Inputs {
            settings: Some(&ModelSettings {
                enabled: vec!["inspect/a".into()],
                default_model: Some("openai/gpt-5.5".into()),
            }),
            compatible: Some("a"),
            ..Default::default()
        });
        assert_eq!(c.default_model, None);
    }

    #[test]
    fn an_effort_must_be_one_the_model_accepts() {
        let names = keys(&["ANTHROPIC_API_KEY"]);
        let c = catalog(&Inputs {
            secret_names: &names,
            ..Default::default()
        });
        assert!(check_effort(&c, Some("anthropic/claude-opus-4-7"), "xhigh").is_ok());
        let e = check_effort(&c, Some("anthropic/claude-sonnet-4-5"), "low").unwrap_err();
        assert!(e.contains("high, max"), "{e}");
        let keys = vec!["DEEPSEEK_API_KEY".to_string()];
        let c = catalog(&Inputs {
            secret_names: &keys,
            ..Default::default()
        });
        let e = check_effort(&c, Some("deepseek/deepseek-v4-pro"), "high").unwrap_err();
        assert!(e.contains("no reasoning effort"), "{e}");
        assert!(check_effort(&c, None, "high").is_ok());
        assert!(check_effort(&c, Some("custom/model"), "bogus").is_err());
    }
}
