//! Which repository or environment a Slack request is for, before any model is asked, in
//! the reference's order: routing rules (a keyword as a whole word), the channel's
//! associations, the only repository there is. What is left goes to the classifier.

use inspect_protocol::slack::SlackSettings;

/// Something a session can work on: a repository (`owner/name`, lower case) or an
/// environment (`env:<id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub id: String,
    /// As people read it: `owner/name`, or the environment's name.
    pub label: String,
    pub description: Option<String>,
}

impl Target {
    pub fn repository(owner: &str, name: &str, description: Option<String>) -> Target {
        Target {
            id: format!("{owner}/{name}").to_ascii_lowercase(),
            label: format!("{owner}/{name}"),
            description,
        }
    }

    pub fn environment(id: &str, name: &str, description: Option<String>) -> Target {
        Target {
            id: format!("env:{id}"),
            label: name.to_owned(),
            description,
        }
    }

    pub fn is_environment(&self) -> bool {
        self.id.starts_with("env:")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Routed {
    /// Nothing is registered to work on.
    Nothing,
    Chosen {
        target: String,
        reason: String,
    },
    /// Several fit: the person picks (these first).
    Ask {
        candidates: Vec<String>,
        reason: String,
    },
    /// Ask the classifier.
    Classify,
}

/// Whether `keyword` appears in `text` as a whole word, ignoring case.
pub fn has_word(text: &str, keyword: &str) -> bool {
    let text = text.to_lowercase();
    let keyword = keyword.trim().to_lowercase();
    if keyword.is_empty() {
        return false;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut start = 0;
    while let Some(found) = text[start..].find(&keyword) {
        let at = start + found;
        let end = at + keyword.len();
        let before = text[..at].chars().next_back();
        let after = text[end..].chars().next();
        if !before.is_some_and(is_word) && !after.is_some_and(is_word) {
            return true;
        }
        start = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn known<'a>(catalog: &'a [Target], id: &str) -> Option<&'a Target> {
    let id = id.to_ascii_lowercase();
    catalog.iter().find(|t| t.id.eq_ignore_ascii_case(&id))
}

pub fn route(text: &str, channel: &str, catalog: &[Target], settings: &SlackSettings) -> Routed {
    if catalog.is_empty() {
        return Routed::Nothing;
    }
    let mut by_rule: Vec<String> = Vec::new();
    for rule in &settings.routing_rules {
        if let Some(t) = known(catalog, &rule.target) {
            if has_word(text, &rule.keyword) && !by_rule.contains(&t.id) {
                by_rule.push(t.id.clone());
            }
        }
    }
    match by_rule.len() {
        0 => {}
        1 => {
            return Routed::Chosen {
                target: by_rule.remove(0),
                reason: "a routing rule's keyword".into(),
            }
        }
        _ => {
            return Routed::Ask {
                candidates: by_rule,
                reason: "several routing rules match".into(),
            }
        }
    }
    let mut by_channel: Vec<&Target> = Vec::new();
    for a in settings
        .channel_associations
        .iter()
        .filter(|a| a.channel == channel)
    {
        if let Some(t) = known(catalog, &a.target) {
            if !by_channel.iter().any(|x| x.id == t.id) {
                by_channel.push(t);
            }
        }
    }
    match by_channel.as_slice() {
        [] => {}
        [only] => {
            return Routed::Chosen {
                target: only.id.clone(),
                reason: "this channel's association".into(),
            }
        }
        several if several.iter().any(|t| t.is_environment()) => {
            return Routed::Ask {
                candidates: several.iter().map(|t| t.id.clone()).collect(),
                reason: "this channel is associated with several".into(),
            }
        }
        _ => {}
    }
    let repositories: Vec<&Target> = catalog.iter().filter(|t| !t.is_environment()).collect();
    if repositories.len() == 1 && repositories.len() == catalog.len() {
        return Routed::Chosen {
            target: repositories[0].id.clone(),
            reason: "the only repository".into(),
        };
    }
    Routed::Classify
}

#[cfg(test)]
mod tests {
    use super::*;
    use inspect_protocol::slack::{ChannelAssociation, RoutingRule};

    fn catalog() -> Vec<Target> {
        vec![
            Target::repository("acme", "web", None),
            Target::repository("acme", "billing", None),
            Target::environment("env_1", "staging", None),
        ]
    }

    #[test]
    fn whole_words_only() {
        assert!(has_word("Fix the Billing page", "billing"));
        assert!(has_word("billing: broken", "billing"));
        assert!(!has_word("rebilling is broken", "billing"));
        assert!(!has_word("billing_v2", "billing"));
        assert!(has_word("the web-app is down", "web-app"));
        assert!(!has_word("anything", " "));
    }

    #[test]
    fn rules_then_channels_then_the_only_repository() {
        let settings = SlackSettings {
            routing_rules: vec![
                RoutingRule {
                    keyword: "billing".into(),
                    target: "acme/billing".into(),
                },
                RoutingRule {
                    keyword: "invoice".into(),
                    target: "acme/billing".into(),
                },
                RoutingRule {
                    keyword: "frontend".into(),
                    target: "acme/web".into(),
                },
                RoutingRule {
                    keyword: "gone".into(),
                    target: "acme/deleted".into(),
                },
            ],
            channel_associations: vec![
                ChannelAssociation {
                    channel: "CWEB".into(),
                    target: "acme/web".into(),
                },
                ChannelAssociation {
                    channel: "CMIX".into(),
                    target: "acme/web".into(),
                },
                ChannelAssociation {
                    channel: "CMIX".into(),
                    target: "env:env_1".into(),
                },
            ],
        };
        let c = catalog();
        assert!(matches!(
            route("the billing invoice is wrong", "C0", &c, &settings),
            Routed::Chosen { target, .. } if target == "acme/billing"
        ));
        assert!(matches!(
            route("billing on the frontend", "C0", &c, &settings),
            Routed::Ask { candidates, .. } if candidates.len() == 2
        ));
        assert!(matches!(
            route("fix it", "CWEB", &c, &settings),
            Routed::Chosen { target, .. } if target == "acme/web"
        ));
        assert!(matches!(
            route("fix it", "CMIX", &c, &settings),
            Routed::Ask { .. }
        ));
        // A rule to something unregistered is passed over.
        assert_eq!(route("gone", "C0", &c, &settings), Routed::Classify);
        let one = vec![Target::repository("acme", "web", None)];
        assert!(matches!(
            route("anything", "C0", &one, &SlackSettings::default()),
            Routed::Chosen { .. }
        ));
        assert_eq!(
            route("x", "C0", &[], &SlackSettings::default()),
            Routed::Nothing
        );
    }
}
