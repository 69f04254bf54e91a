//! Which repository or environment an issue is worked in, in order: the issue's project
//! mapping, its team's mapping (a labelled one first), an explicit `owner/repo` in the
//! comment that called the agent, Linear's own repository suggestions above a confidence
//! bound, and what is left goes to the classifier shared with Slack. When nothing decides,
//! the person is asked (an `elicitation` listing the candidates) and their reply picks.

use crate::issue::Issue;
use inspect_protocol::linear::LinearSettings;
use inspect_slack::routing::Target;

/// Linear's suggestions are taken from this confidence up.
pub const SUGGESTION_CONFIDENCE: f64 = 0.7;

/// Candidates listed when the person is asked, at most.
pub const MAX_CANDIDATES: usize = 10;

#[derive(Debug, Clone, PartialEq)]
pub enum Routed {
    /// Nothing is registered to work on.
    Nothing,
    Chosen {
        target: String,
        reason: String,
    },
    /// Ask Linear's suggestions, then the classifier.
    Undecided,
}

fn known<'a>(catalog: &'a [Target], id: &str) -> Option<&'a Target> {
    catalog.iter().find(|t| t.id.eq_ignore_ascii_case(id))
}

/// The mappings, the explicit mention, and the only target there is.
pub fn route(
    issue: &Issue,
    comment: Option<&str>,
    catalog: &[Target],
    s: &LinearSettings,
) -> Routed {
    if catalog.is_empty() {
        return Routed::Nothing;
    }
    let chosen = |t: &Target, reason: String| Routed::Chosen {
        target: t.id.clone(),
        reason,
    };
    if let Some(project) = &issue.project {
        for m in &s.project_mappings {
            let hit = m.project.eq_ignore_ascii_case(&project.id)
                || m.project.trim().eq_ignore_ascii_case(project.name.trim());
            if let (true, Some(t)) = (hit, known(catalog, &m.target)) {
                return chosen(t, format!("the project {} is mapped to it", project.name));
            }
        }
    }
    if let Some(team) = &issue.team {
        let of_team =
            |key: &str| key.eq_ignore_ascii_case(&team.key) || key.eq_ignore_ascii_case(&team.id);
        let labelled = s.team_mappings.iter().find(|m| {
            of_team(&m.team)
                && m.label.as_deref().is_some_and(|l| {
                    issue
                        .labels
                        .iter()
                        .any(|have| have.trim().eq_ignore_ascii_case(l.trim()))
                })
                && known(catalog, &m.target).is_some()
        });
        let plain = || {
            s.team_mappings.iter().find(|m| {
                of_team(&m.team) && m.label.is_none() && known(catalog, &m.target).is_some()
            })
        };
        if let Some(m) = labelled.or_else(plain) {
            if let Some(t) = known(catalog, &m.target) {
                let why = match &m.label {
                    Some(l) => format!("the team {} maps issues labelled {l} to it", team.key),
                    None => format!("the team {} is mapped to it", team.key),
                };
                return chosen(t, why);
            }
        }
    }
    if let Some(t) = comment.and_then(|c| named_repository(c, catalog)) {
        return chosen(t, "the comment names it".into());
    }
    if catalog.len() == 1 {
        return chosen(&catalog[0], "it is the only one registered".into());
    }
    Routed::Undecided
}

/// A registered repository named as `owner/name` (a word of its own) in `text`.
pub fn named_repository<'a>(text: &str, catalog: &'a [Target]) -> Option<&'a Target> {
    text.split(|c: char| c.is_whitespace() || "`'\"()[]<>,;".contains(c))
        .map(|w| w.trim_end_matches(['.', ':', '!', '?']))
        .filter(|w| w.matches('/').count() == 1)
        .find_map(|w| {
            let w = w.strip_prefix("https://github.com/").unwrap_or(w);
            catalog
                .iter()
                .find(|t| !t.is_environment() && t.id.eq_ignore_ascii_case(w))
        })
}

/// The best of Linear's suggestions that is registered here and sure enough.
pub fn pick_suggestion(suggestions: &[(String, f64)], catalog: &[Target]) -> Option<(String, f64)> {
    suggestions
        .iter()
        .filter(|(_, c)| *c >= SUGGESTION_CONFIDENCE)
        .filter_map(|(name, c)| known(catalog, name).map(|t| (t.id.clone(), *c)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The candidates to list when the person is asked: the classifier's (or Linear's) first,
/// then the rest of the catalog, at most [`MAX_CANDIDATES`].
pub fn candidates(first: &[String], catalog: &[Target]) -> Vec<Target> {
    let mut out: Vec<Target> = Vec::new();
    for id in first {
        if let Some(t) = known(catalog, id) {
            if !out.iter().any(|o| o.id == t.id) {
                out.push(t.clone());
            }
        }
    }
    for t in catalog {
        if out.len() >= MAX_CANDIDATES {
            break;
        }
        if !out.iter().any(|o| o.id == t.id) {
            out.push(t.clone());
        }
    }
    out.truncate(MAX_CANDIDATES);
    out
}

/// The question put to the person: the candidates numbered.
pub fn elicitation(candidates: &[Target]) -> String {
    let mut out = String::from(
        "Which repository or environment should I work in? Reply with its number or its name:\n\n",
    );
    for (i, t) in candidates.iter().enumerate() {
        let kind = if t.is_environment() {
            "environment"
        } else {
            "repository"
        };
        out.push_str(&format!("{}. **{}** ({kind})\n", i + 1, t.label));
    }
    out
}

/// The candidate a reply picks: its number, its id or label (case-insensitively), or the
/// one candidate whose name the reply contains.
pub fn pick_reply(reply: &str, candidates: &[Target]) -> Option<Target> {
    let r = reply.trim().trim_end_matches('.').trim();
    if let Ok(n) = r.parse::<usize>() {
        return candidates.get(n.checked_sub(1)?).cloned();
    }
    if let Some(t) = candidates
        .iter()
        .find(|t| t.id.eq_ignore_ascii_case(r) || t.label.eq_ignore_ascii_case(r))
    {
        return Some(t.clone());
    }
    let lower = r.to_lowercase();
    let mut named = candidates
        .iter()
        .filter(|t| lower.contains(&t.label.to_lowercase()) || lower.contains(&t.id));
    match (named.next(), named.next()) {
        (Some(t), None) => Some(t.clone()),
        _ => None,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::issue::{Named, Team};
    use inspect_protocol::linear::{ProjectMapping, TeamMapping};

    fn catalog() -> Vec<Target> {
        vec![
            Target::environment("e1", "Storefront stack", None),
            Target::repository("acme", "api", None),
            Target::repository("acme", "web", None),
        ]
    }

    fn issue(labels: &[&str], project: Option<&str>) -> Issue {
        Issue {
            id: "i1".into(),
            identifier: "ENG-1".into(),
            title: "Fix it".into(),
            team: Some(Team {
                id: "t1".into(),
                key: "ENG".into(),
                name: "Engineering".into(),
            }),
            labels: labels.iter().map(|l| l.to_string()).collect(),
            project: project.map(|p| Named {
                id: format!("p-{p}"),
                name: p.into(),
            }),
            ..Issue::default()
        }
    }

    #[test]
    fn project_then_labelled_team_then_team_then_comment() {
        let mut s = LinearSettings {
            team_mappings: vec![
                TeamMapping {
                    team: "eng".into(),
                    label: None,
                    target: "acme/api".into(),
                },
                TeamMapping {
                    team: "ENG".into(),
                    label: Some("Frontend".into()),
                    target: "acme/web".into(),
                },
            ],
            project_mappings: vec![ProjectMapping {
                project: "Storefront".into(),
                target: "env:e1".into(),
            }],
            ..LinearSettings::default()
        };
        let c = catalog();
        let target = |r: Routed| match r {
            Routed::Chosen { target, .. } => target,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            target(route(
                &issue(&["frontend"], Some("Storefront")),
                None,
                &c,
                &s
            )),
            "env:e1"
        );
        assert_eq!(
            target(route(&issue(&["frontend"], None), None, &c, &s)),
            "acme/web"
        );
        assert_eq!(target(route(&issue(&[], None), None, &c, &s)), "acme/api");
        // A mapping to something not registered does not count.
        s.team_mappings[0].target = "gone/repo".into();
        assert_eq!(
            target(route(
                &issue(&[], None),
                Some("please look at acme/web, thanks"),
                &c,
                &s
            )),
            "acme/web"
        );
        assert_eq!(
            route(&issue(&[], None), Some("no idea"), &c, &s),
            Routed::Undecided
        );
        assert_eq!(route(&issue(&[], None), None, &[], &s), Routed::Nothing);
        assert_eq!(
            target(route(&issue(&[], None), None, &c[1..2], &s)),
            "acme/api"
        );
    }

    #[test]
    fn suggestions_need_confidence_and_registration() {
        let c = catalog();
        let s = vec![
            ("acme/web".to_string(), 0.65),
            ("ACME/api".to_string(), 0.9),
            ("other/x".to_string(), 0.99),
        ];
        assert_eq!(pick_suggestion(&s, &c), Some(("acme/api".to_string(), 0.9)));
        assert_eq!(pick_suggestion(&s[..1], &c), None);
    }

    #[test]
    fn a_reply_picks_by_number_or_name() {
        let c = candidates(&["acme/web".into()], &catalog());
        assert_eq!(c[0].id, "acme/web");
        assert_eq!(c.len(), 3);
        let q = elicitation(&c);
        assert!(q.contains("1. **acme/web** (repository)"), "{q}");
        assert_eq!(pick_reply(" 2 ", &c).unwrap().id, "env:e1");
        assert_eq!(pick_reply("acme/api", &c).unwrap().id, "acme/api");
        assert_eq!(
            pick_reply("the storefront stack please", &c).unwrap().id,
            "env:e1"
        );
        assert_eq!(pick_reply("9", &c), None);
        assert_eq!(pick_reply("0", &c), None);
        assert_eq!(pick_reply("acme", &c), None);
    }
}
