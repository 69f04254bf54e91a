//! Linear as a front door: the settings people edit (which team or project works in which
//! repository or environment, whether an issue moves when work starts), the installation
//! as shown, and what a Linear-started prompt carries for its progress and its answer in
//! Linear's agent panel.

use serde::{Deserialize, Serialize};

/// Issues of a team (its key, `ENG`) go to a target; with `label`, only issues carrying
/// that label (case-insensitively). A labelled mapping wins over the team's plain one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TeamMapping {
    pub team: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub label: Option<String>,
    /// `owner/name` or `env:<id>`.
    pub target: String,
}

/// Issues of a project (its id or its name) go to a target; a project mapping wins over
/// every team mapping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProjectMapping {
    pub project: String,
    pub target: String,
}

/// `GET|PUT /integrations/linear/settings`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LinearSettings {
    #[serde(default)]
    pub team_mappings: Vec<TeamMapping>,
    #[serde(default)]
    pub project_mappings: Vec<ProjectMapping>,
    /// Move an issue to its team's first `started` state when the agent starts on it.
    #[serde(default)]
    pub move_issue_on_start: bool,
    /// Show each tool the agent runs in the agent panel (ephemeral `action` activities).
    #[serde(default = "yes")]
    pub tool_progress: bool,
}

fn yes() -> bool {
    true
}

impl Default for LinearSettings {
    fn default() -> Self {
        LinearSettings {
            team_mappings: Vec::new(),
            project_mappings: Vec::new(),
            move_issue_on_start: false,
            tool_progress: true,
        }
    }
}

pub const MAX_MAPPINGS: usize = 100;

/// Whether `t` names a target: `owner/name` or `env:<id>`.
pub fn is_target(t: &str) -> bool {
    match t.strip_prefix("env:") {
        Some(id) => !id.is_empty() && id.len() <= 80,
        None => t.split_once('/').is_some_and(|(o, n)| {
            !o.is_empty() && !n.is_empty() && !n.contains('/') && t.len() <= 200
        }),
    }
}

impl LinearSettings {
    /// Team keys and labels 1-50 characters, projects 1-100, targets `owner/name` or
    /// `env:<id>`, at most [`MAX_MAPPINGS`] of each.
    pub fn validate(&self) -> Result<(), String> {
        if self.team_mappings.len() > MAX_MAPPINGS || self.project_mappings.len() > MAX_MAPPINGS {
            return Err(format!(
                "at most {MAX_MAPPINGS} team mappings and {MAX_MAPPINGS} project mappings"
            ));
        }
        let sized = |s: &str, max: usize| !s.trim().is_empty() && s.chars().count() <= max;
        for m in &self.team_mappings {
            if !sized(&m.team, 50) {
                return Err("a team key is 1-50 characters".into());
            }
            if m.label.as_deref().is_some_and(|l| !sized(l, 50)) {
                return Err("a label is 1-50 characters".into());
            }
            if !is_target(&m.target) {
                return Err(format!("{:?} is not owner/name or env:<id>", m.target));
            }
        }
        for m in &self.project_mappings {
            if !sized(&m.project, 100) {
                return Err("a project is 1-100 characters".into());
            }
            if !is_target(&m.target) {
                return Err(format!("{:?} is not owner/name or env:<id>", m.target));
            }
        }
        Ok(())
    }
}

/// The workspace the Linear app is installed in, as shown (never its tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LinearInstallation {
    pub organization_id: String,
    pub organization_name: String,
    /// The app's own user in that workspace (the agent people assign and mention).
    pub app_user_id: String,
    pub installed_at: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ts", ts(optional))]
    pub installed_by: Option<String>,
}

/// `GET /integrations/linear`: whether the deployment is set up for Linear, the
/// installations, and the settings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LinearStatus {
    /// `LINEAR_CLIENT_ID`, `LINEAR_CLIENT_SECRET` and `LINEAR_WEBHOOK_SECRET` are set.
    pub configured: bool,
    pub installations: Vec<LinearInstallation>,
    pub settings: LinearSettings,
}

/// `POST /integrations/linear/install`: where to send the person's browser.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LinearInstallStart {
    pub url: String,
}

/// Where a Linear-started prompt reports: the agent session in Linear's panel, the issue,
/// and whether tools are shown as they run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct LinearAgentSession {
    pub agent_session_id: String,
    pub organization_id: String,
    pub issue_id: String,
    /// `ENG-123`.
    pub issue_identifier: String,
    pub issue_url: String,
    /// What the session works on, as shown (`owner/name` or an environment's name).
    pub target: String,
    /// Each tool the agent runs becomes an ephemeral `action` activity.
    #[serde(default)]
    pub tool_progress: bool,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_bounded_and_default_to_showing_tools() {
        let s: LinearSettings = serde_json::from_str("{}").unwrap();
        assert!(s.tool_progress && !s.move_issue_on_start);
        assert_eq!(s, LinearSettings::default());
        let mut s = LinearSettings::default();
        s.team_mappings.push(TeamMapping {
            team: "ENG".into(),
            label: Some("backend".into()),
            target: "acme/api".into(),
        });
        s.project_mappings.push(ProjectMapping {
            project: "Storefront".into(),
            target: "env:abc".into(),
        });
        assert!(s.validate().is_ok());
        s.team_mappings[0].target = "acme".into();
        assert!(s.validate().unwrap_err().contains("owner/name"));
        s.team_mappings[0].target = "acme/api".into();
        s.team_mappings[0].label = Some(" ".into());
        assert!(s.validate().is_err());
        assert!(serde_json::from_str::<LinearSettings>(r#"{"teams": []}"#).is_err());
    }
}
