//! Wire types of usage: what sessions used, grouped for the analytics page and its CSV.

use serde::{Deserialize, Serialize};

/// How `GET /usage` groups sessions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum UsageGroup {
    #[default]
    Person,
    Repository,
    /// The week a session was made in (its Monday, UTC).
    Week,
    /// The door a session came through ([`SessionSource`]).
    Source,
}

/// The door a session came through, kept in its index row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum SessionSource {
    /// The web app (a browser, or the local user).
    Web,
    /// The REST API with a token.
    Api,
    Slack,
    Github,
    Linear,
    Automation,
    /// Made by another session's agent.
    Child,
}

impl SessionSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionSource::Web => "web",
            SessionSource::Api => "api",
            SessionSource::Slack => "slack",
            SessionSource::Github => "github",
            SessionSource::Linear => "linear",
            SessionSource::Automation => "automation",
            SessionSource::Child => "child",
        }
    }

    /// The bot a session came from, by the identity it was asked as (`slack:U…`).
    pub fn of_bot_identity(user_id: &str) -> SessionSource {
        match user_id.split(':').next() {
            Some("slack") => SessionSource::Slack,
            Some("linear") => SessionSource::Linear,
            Some("github") => SessionSource::Github,
            _ => SessionSource::Api,
        }
    }
}

impl UsageGroup {
    pub fn parse(s: &str) -> Option<UsageGroup> {
        match s {
            "person" => Some(UsageGroup::Person),
            "repository" => Some(UsageGroup::Repository),
            "week" => Some(UsageGroup::Week),
            "source" => Some(UsageGroup::Source),
            _ => None,
        }
    }
}

/// One group's sums.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    /// The person's user id, `owner/name`, or the week's Monday (`YYYY-MM-DD`).
    pub key: String,
    /// What to show: the person's name, else the key.
    pub label: String,
    pub sessions: i64,
    pub prompts: i64,
    pub tool_calls: i64,
    pub tokens_in: i64,
    pub tokens_out: i64,
    /// Millionths of a dollar, as the agents reported cost.
    pub cost_micros: i64,
    pub sandbox_ms: i64,
    /// Sessions with a pull request, and those whose newest one was merged.
    pub pull_requests: i64,
    pub merged: i64,
}

/// `GET /usage?by=person|repository|week&since=&until=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    pub by: UsageGroup,
    /// Sessions made from `since` (inclusive) to `until` (exclusive), epoch ms.
    pub since: i64,
    pub until: i64,
    /// Everyone's (an admin), or only the caller's own sessions.
    pub everyone: bool,
    pub rows: Vec<UsageRow>,
}

impl UsageReport {
    /// The report as CSV (RFC 4180: a header, `,`-separated, quoted where a field needs it).
    pub fn csv(&self) -> String {
        fn field(s: &str) -> String {
            if s.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_owned()
            }
        }
        let mut out = String::from(
            "key,label,sessions,prompts,tool_calls,tokens_in,tokens_out,cost_usd,sandbox_hours,pull_requests,merged\r\n",
        );
        for r in &self.rows {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{:.6},{:.4},{},{}\r\n",
                field(&r.key),
                field(&r.label),
                r.sessions,
                r.prompts,
                r.tool_calls,
                r.tokens_in,
                r.tokens_out,
                r.cost_micros as f64 / 1_000_000.0,
                r.sandbox_ms as f64 / 3_600_000.0,
                r.pull_requests,
                r.merged
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_csv_has_a_header_and_quotes_what_needs_it() {
        let report = UsageReport {
            by: UsageGroup::Person,
            since: 0,
            until: 1,
            everyone: true,
            rows: vec![UsageRow {
                key: "github:1".into(),
                label: "Ann \"the\" Dev, Jr.".into(),
                sessions: 2,
                cost_micros: 12_500,
                sandbox_ms: 1_800_000,
                ..Default::default()
            }],
        };
        let csv = report.csv();
        let lines: Vec<&str> = csv.split("\r\n").collect();
        assert!(lines[0].starts_with("key,label,sessions"));
        assert_eq!(
            lines[1],
            "github:1,\"Ann \"\"the\"\" Dev, Jr.\",2,0,0,0,0,0.012500,0.5000,0,0"
        );
        assert_eq!(UsageGroup::parse("week"), Some(UsageGroup::Week));
        assert_eq!(UsageGroup::parse("weeks"), None);
    }
}
