//! The messages and views the bot shows, in Block Kit: the picker, the progress message
//! updated as the session runs, the final message, and the App Home.

use crate::routing::Target;
use serde_json::{json, Value};

/// Block Kit's limit on a select's options.
pub const MAX_OPTIONS: usize = 100;
pub const MAX_QUICK_PICKS: usize = 5;
/// What a section's text may hold (Block Kit's limit is 3,000 characters).
const SECTION_LIMIT: usize = 2900;
/// Sections a long text (a summary) may take in one message.
const MAX_TEXT_SECTIONS: usize = 8;

/// Escapes what Slack's mrkdwn reads as markup.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Where `text` may be cut to keep at most `limit` characters: at a line's end or a space
/// when there is one in the last fifth, never inside an escape (`&amp;`, `&lt;`, `&gt;`).
/// A byte index.
fn cut_at(text: &str, limit: usize) -> usize {
    let Some((hard, _)) = text.char_indices().nth(limit) else {
        return text.len();
    };
    let mut at = hard;
    // Not inside an entity: back to its `&` when one is open.
    if let Some(amp) = text[..at].rfind('&') {
        if !text[amp..at].contains(';') && at - amp < 5 {
            at = amp;
        }
    }
    let soft = text[..at]
        .rfind('\n')
        .or_else(|| text[..at].rfind(' '))
        .filter(|&i| i > 0 && text[..i].chars().count() >= limit * 4 / 5);
    soft.map_or(at, |i| i + 1)
}

fn clip(text: &str, limit: usize) -> String {
    let at = cut_at(text, limit);
    if at == text.len() {
        return text.to_owned();
    }
    let mut out = text[..at].trim_end().to_owned();
    out.push('…');
    out
}

fn section(text: &str) -> Value {
    json!({"type": "section", "text": {"type": "mrkdwn", "text": clip(text, SECTION_LIMIT)}})
}

/// A long text as consecutive sections, each within Block Kit's limit, cut between words
/// and never inside an escape; what does not fit in [`MAX_TEXT_SECTIONS`] is clipped.
fn sections(text: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() && out.len() < MAX_TEXT_SECTIONS {
        let at = cut_at(rest, SECTION_LIMIT);
        let (this, next) = rest.split_at(at);
        let last = out.len() + 1 == MAX_TEXT_SECTIONS && !next.trim().is_empty();
        let shown = if last {
            format!("{}…", this.trim_end())
        } else {
            this.trim_end().to_owned()
        };
        if !shown.is_empty() {
            out.push(json!({"type": "section", "text": {"type": "mrkdwn", "text": shown}}));
        }
        rest = next.trim_start();
    }
    out
}

fn view_button(session_url: &str) -> Value {
    json!({"type": "actions", "elements": [{"type": "button", "action_id": "view_session", "text": {"type": "plain_text", "text": "View session"}, "url": session_url}]})
}

/// A message: the notification text and its blocks.
pub fn message(text: &str, blocks: Vec<Value>) -> Value {
    json!({"text": clip(text, SECTION_LIMIT), "blocks": blocks})
}

fn elapsed(secs: i64) -> String {
    if secs < 60 {
        format!("{secs}s")
    } else {
        format!("{}m {}s", secs / 60, secs % 60)
    }
}

/// The progress message: what the session is doing now.
pub fn progress(
    target: &str,
    status: &str,
    tool: Option<&str>,
    secs: i64,
    session_url: &str,
) -> Value {
    let doing = match tool {
        Some(t) => format!(" · running `{}`", escape(t)),
        None => String::new(),
    };
    let line = format!(
        ":hourglass_flowing_sand: *{}* — {}{} · {}",
        escape(target),
        escape(status),
        doing,
        elapsed(secs)
    );
    message(
        &format!("Working on {target}: {status}"),
        vec![section(&line), view_button(session_url)],
    )
}

/// What the final message says.
pub struct Outcome<'a> {
    pub success: bool,
    pub error: Option<&'a str>,
    pub summary: Option<&'a str>,
    pub pull_requests: &'a [(String, String)],
    pub changed_files: &'a [String],
    pub target: &'a str,
    pub secs: i64,
}

/// The final message: the outcome, the agent's summary, changed files, the PR link.
pub fn finished(o: &Outcome<'_>, session_url: &str) -> Value {
    let head = if o.success {
        format!(
            ":white_check_mark: *Done* on *{}* in {}",
            escape(o.target),
            elapsed(o.secs)
        )
    } else {
        format!(
            ":warning: *Not finished* on *{}*: {}",
            escape(o.target),
            escape(o.error.unwrap_or("the agent stopped"))
        )
    };
    let mut blocks = vec![section(&head)];
    if let Some(s) = o.summary.filter(|s| !s.trim().is_empty()) {
        blocks.extend(sections(&escape(s.trim())));
    }
    if !o.changed_files.is_empty() {
        let shown: Vec<String> = o
            .changed_files
            .iter()
            .take(15)
            .map(|f| format!("`{}`", escape(f)))
            .collect();
        let more = o.changed_files.len().saturating_sub(15);
        let tail = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        blocks.push(section(&format!("*Changed:* {}{tail}", shown.join(", "))));
    }
    for (url, state) in o.pull_requests {
        blocks.push(section(&format!(
            "*Pull request* ({}): <{url}>",
            escape(state)
        )));
    }
    blocks.push(view_button(session_url));
    let text = if o.success {
        format!("Done on {}", o.target)
    } else {
        format!("Not finished on {}", o.target)
    };
    message(&text, blocks)
}

fn option(t: &Target) -> Value {
    json!({"text": {"type": "plain_text", "text": clip(&t.label, 70)}, "value": t.id})
}

/// Options grouped as Environments, then Repositories, those matching `query` (by label or
/// id), at most [`MAX_OPTIONS`]: the answer to a `block_suggestion`, and a static select's.
pub fn option_groups(all: &[Target], query: &str) -> Value {
    let q = query.trim().to_lowercase();
    let matching: Vec<&Target> = all
        .iter()
        .filter(|t| q.is_empty() || t.label.to_lowercase().contains(&q) || t.id.contains(&q))
        .take(MAX_OPTIONS)
        .collect();
    let mut groups = Vec::new();
    for (label, envs) in [("Environments", true), ("Repositories", false)] {
        let options: Vec<Value> = matching
            .iter()
            .filter(|t| t.is_environment() == envs)
            .map(|t| option(t))
            .collect();
        if !options.is_empty() {
            groups
                .push(json!({"label": {"type": "plain_text", "text": label}, "options": options}));
        }
    }
    json!(groups)
}

/// The picker: the question, up to five quick picks (the likeliest), and a select of
/// everything (static up to 100 targets, else loaded as the person types).
pub fn picker(question: &str, likeliest: &[&Target], all: &[Target]) -> Value {
    let mut blocks = vec![section(question)];
    if !likeliest.is_empty() {
        let buttons: Vec<Value> = likeliest
            .iter()
            .take(MAX_QUICK_PICKS)
            .enumerate()
            .map(|(i, t)| {
                json!({"type": "button", "action_id": format!("select_repo_quick_pick:{i}"), "text": {"type": "plain_text", "text": clip(&t.label, 70)}, "value": t.id})
            })
            .collect();
        blocks.push(json!({"type": "actions", "block_id": "quick_picks", "elements": buttons}));
    }
    let placeholder = json!({"type": "plain_text", "text": "Pick a repository or environment"});
    let select = if all.len() <= MAX_OPTIONS {
        json!({"type": "static_select", "action_id": "select_repo", "placeholder": placeholder, "option_groups": option_groups(all, "")})
    } else {
        json!({"type": "external_select", "action_id": "select_repo", "placeholder": placeholder, "min_query_length": 0})
    };
    blocks.push(json!({"type": "actions", "block_id": "picker", "elements": [select]}));
    message(question, blocks)
}

/// A person's preferences for the sessions they start from Slack.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Preferences {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

pub use inspect_protocol::limits::REASONING_EFFORTS as EFFORTS;

/// The App Home: the person's model, reasoning effort and branch.
pub fn home(prefs: &Preferences, models: &[String]) -> Value {
    let choice = |v: &str| json!({"text": {"type": "plain_text", "text": v}, "value": v});
    // A select holds 1 to 100 options: no models, no select; more, the first 100.
    let models = &models[..models.len().min(MAX_OPTIONS)];
    let mut model = json!({"type": "static_select", "action_id": "select_model", "placeholder": {"type": "plain_text", "text": "The default model"}, "options": models.iter().map(|m| choice(m)).collect::<Vec<_>>()});
    if let Some(m) = prefs
        .model
        .as_deref()
        .filter(|m| models.iter().any(|x| x == m))
    {
        model["initial_option"] = choice(m);
    }
    let mut effort = json!({"type": "static_select", "action_id": "select_reasoning_effort", "placeholder": {"type": "plain_text", "text": "The model's default"}, "options": EFFORTS.iter().map(|e| choice(e)).collect::<Vec<_>>()});
    if let Some(e) = prefs
        .reasoning_effort
        .as_deref()
        .filter(|e| EFFORTS.contains(e))
    {
        effort["initial_option"] = choice(e);
    }
    let mut branch = json!({"type": "plain_text_input", "action_id": "set_branch", "dispatch_action_config": {"trigger_actions_on": ["on_enter_pressed"]}, "placeholder": {"type": "plain_text", "text": "the repository's default"}});
    if let Some(b) = &prefs.branch {
        branch["initial_value"] = json!(b);
    }
    let mut blocks = vec![
        json!({"type": "header", "text": {"type": "plain_text", "text": "Your agent settings"}}),
        section("Sessions you start from Slack use these."),
        if models.is_empty() {
            json!({"type": "section", "block_id": "model", "text": {"type": "mrkdwn", "text": "*Model*: the deployment's default (no models to choose from are configured)"}})
        } else {
            json!({"type": "section", "block_id": "model", "text": {"type": "mrkdwn", "text": "*Model*"}, "accessory": model})
        },
        json!({"type": "section", "block_id": "effort", "text": {"type": "mrkdwn", "text": "*Reasoning effort*"}, "accessory": effort}),
        json!({"type": "input", "block_id": "branch", "dispatch_action": true, "label": {"type": "plain_text", "text": "Base branch (Enter to save)"}, "element": branch, "optional": true}),
    ];
    if prefs.branch.is_some() {
        blocks.push(json!({"type": "actions", "elements": [{"type": "button", "action_id": "clear_branch_preference", "text": {"type": "plain_text", "text": "Clear the branch"}}]}));
    }
    json!({"type": "home", "blocks": blocks})
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn picker_static_then_external() {
        let few = vec![
            Target::repository("acme", "web", None),
            Target::environment("env_1", "staging", None),
        ];
        let p = picker("Which one?", &[&few[0]], &few);
        let blocks = p["blocks"].as_array().unwrap();
        assert_eq!(
            blocks[1]["elements"][0]["action_id"],
            "select_repo_quick_pick:0"
        );
        assert_eq!(blocks[1]["elements"][0]["value"], "acme/web");
        let select = &blocks[2]["elements"][0];
        assert_eq!(select["type"], "static_select");
        assert_eq!(select["option_groups"][0]["label"]["text"], "Environments");
        assert_eq!(
            select["option_groups"][1]["options"][0]["value"],
            "acme/web"
        );
        let many: Vec<Target> = (0..150)
            .map(|i| Target::repository("acme", &format!("r{i}"), None))
            .collect();
        let p = picker("Which?", &[], &many);
        assert_eq!(p["blocks"][1]["elements"][0]["type"], "external_select");
        let groups = option_groups(&many, "r1");
        let n = groups[0]["options"].as_array().unwrap().len();
        assert_eq!(n, 61, "r1, r10-r19, r100-r149");
        assert_eq!(
            option_groups(&many, "")[0]["options"]
                .as_array()
                .unwrap()
                .len(),
            100
        );
    }

    #[test]
    fn progress_and_outcome() {
        let p = progress(
            "acme/web",
            "running",
            Some("bash"),
            75,
            "http://x/sessions/s",
        );
        let text = p["blocks"][0]["text"]["text"].as_str().unwrap();
        assert!(text.contains("`bash`") && text.contains("1m 15s"), "{text}");
        let prs = vec![(
            "https://github.com/acme/web/pull/3".to_string(),
            "open".to_string(),
        )];
        let files = vec!["src/a.rs".to_string()];
        let f = finished(
            &Outcome {
                success: true,
                error: None,
                summary: Some("Fixed <it> & more"),
                pull_requests: &prs,
                changed_files: &files,
                target: "acme/web",
                secs: 5,
            },
            "http://x/sessions/s",
        );
        let all = f.to_string();
        assert!(all.contains("Fixed &lt;it&gt; &amp; more"));
        assert!(all.contains("pull/3"));
        assert!(all.contains("`src/a.rs`"));
        let failed = finished(
            &Outcome {
                success: false,
                error: Some("the sandbox failed to boot"),
                summary: None,
                pull_requests: &[],
                changed_files: &[],
                target: "acme/web",
                secs: 5,
            },
            "u",
        );
        assert!(failed["text"].as_str().unwrap().starts_with("Not finished"));
        assert!(failed.to_string().contains("failed to boot"));
    }

    #[test]
    fn home_shows_preferences() {
        let prefs = Preferences {
            model: Some("anthropic/claude".into()),
            reasoning_effort: Some("high".into()),
            branch: Some("develop".into()),
        };
        let v = home(&prefs, &["anthropic/claude".into(), "openai/gpt".into()]);
        let s = v.to_string();
        assert_eq!(v["type"], "home");
        assert!(s.contains("\"initial_value\":\"develop\""));
        assert!(s.contains("clear_branch_preference"));
        assert_eq!(
            v["blocks"][2]["accessory"]["initial_option"]["value"],
            "anthropic/claude"
        );
    }

    #[test]
    fn a_long_summary_takes_several_sections_cut_between_words_never_in_an_escape() {
        let summary = "fixed a & b in the parser ".repeat(400); // 10,400 characters
        let o = Outcome {
            success: true,
            error: None,
            summary: Some(&summary),
            pull_requests: &[],
            changed_files: &[],
            target: "acme/web",
            secs: 5,
        };
        let message = finished(&o, "https://x/sessions/s");
        let texts: Vec<String> = message["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|b| b["text"]["text"].as_str().map(str::to_owned))
            .collect();
        assert!(texts.len() >= 5, "{}", texts.len());
        for t in &texts {
            assert!(t.chars().count() <= 3000, "{}", t.chars().count());
            // Every escape whole: no `&` that does not start `&amp;`.
            for (i, _) in t.match_indices('&') {
                assert!(t[i..].starts_with("&amp;"), "cut inside an escape: {t}");
            }
        }
        let shown: String = texts[1..].join(" ");
        assert_eq!(shown.matches("parser").count(), 400, "nothing lost");
    }

    #[test]
    fn the_home_has_a_model_select_only_with_1_to_100_models() {
        let prefs = Preferences::default();
        let none = home(&prefs, &[]);
        assert!(!none.to_string().contains("select_model"), "{none}");
        let many: Vec<String> = (0..150).map(|i| format!("m/{i}")).collect();
        let capped = home(&prefs, &many);
        let select = &capped["blocks"][2]["accessory"];
        assert_eq!(select["options"].as_array().unwrap().len(), 100);
    }
}
