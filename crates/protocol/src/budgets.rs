//! Monthly budgets that stop spend: per person, for every person, or for the whole
//! deployment, on sandbox hours, model tokens or cost. The rules are pure: the month a time
//! falls in (UTC calendar months), how much of a budget is used, and the refusal once one
//! is spent.

use crate::ApiError;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum BudgetMetric {
    SandboxHours,
    Tokens,
    CostUsd,
}

impl BudgetMetric {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetMetric::SandboxHours => "sandbox_hours",
            BudgetMetric::Tokens => "tokens",
            BudgetMetric::CostUsd => "cost_usd",
        }
    }

    pub fn parse(s: &str) -> Option<BudgetMetric> {
        match s {
            "sandbox_hours" => Some(BudgetMetric::SandboxHours),
            "tokens" => Some(BudgetMetric::Tokens),
            "cost_usd" => Some(BudgetMetric::CostUsd),
            _ => None,
        }
    }

    pub fn words(self, amount: f64) -> String {
        match self {
            BudgetMetric::SandboxHours => format!("{amount:.1} sandbox hours"),
            BudgetMetric::Tokens => format!("{} model tokens", amount.round() as i64),
            BudgetMetric::CostUsd => format!("${amount:.2} of model cost"),
        }
    }

    /// The largest limit a budget may have.
    pub fn ceiling(self) -> f64 {
        match self {
            BudgetMetric::SandboxHours => 1_000_000.0,
            BudgetMetric::Tokens => 1e13,
            BudgetMetric::CostUsd => 10_000_000.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub enum BudgetScope {
    /// Everyone's sessions together.
    Deployment,
    /// One person's sessions (`subject`: their user id), or each person's (`subject`: `*`).
    Person,
}

impl BudgetScope {
    pub fn as_str(self) -> &'static str {
        match self {
            BudgetScope::Deployment => "deployment",
            BudgetScope::Person => "person",
        }
    }
}

/// `PUT /budgets`: a budget set (or raised, or lowered) by an admin.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Budget {
    pub scope: BudgetScope,
    /// For a person's budget: their user id, or `*` for each person's own. Empty for the
    /// deployment's.
    #[serde(default)]
    pub subject: String,
    pub metric: BudgetMetric,
    /// How much a calendar month (UTC) may use.
    pub monthly_limit: f64,
}

impl Budget {
    /// Checks a budget an admin sends; the error says what is wrong.
    pub fn check(mut self) -> Result<Budget, ApiError> {
        if !self.monthly_limit.is_finite() || self.monthly_limit < 0.0 {
            return Err(ApiError::bad_request("monthlyLimit is a number, 0 or more"));
        }
        if self.monthly_limit > self.metric.ceiling() {
            return Err(ApiError::bad_request(format!(
                "monthlyLimit is at most {} for {}",
                self.metric.ceiling(),
                self.metric.as_str()
            )));
        }
        match self.scope {
            BudgetScope::Deployment => self.subject.clear(),
            BudgetScope::Person => {
                let s = self.subject.trim();
                let plain = s == "*"
                    || (s.contains(':')
                        && s.len() <= 128
                        && !s.chars().any(|c| c.is_control() || c.is_whitespace()));
                if !plain {
                    return Err(ApiError::bad_request(
                        "a person's budget names their user id (github:1001) or * for each person",
                    ));
                }
                self.subject = s.to_owned();
            }
        }
        Ok(self)
    }

    /// Who it counts for, in words.
    fn whose(&self) -> String {
        match (self.scope, self.subject.as_str()) {
            (BudgetScope::Deployment, _) => "the deployment's".into(),
            (BudgetScope::Person, "*") => "your".into(),
            (BudgetScope::Person, _) => "your".into(),
        }
    }
}

/// A budget and how much of it this month has used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "camelCase")]
pub struct BudgetStatus {
    pub budget: Budget,
    pub used: f64,
    /// When the month ends (epoch ms): the budget starts anew.
    pub resets_at: i64,
}

impl BudgetStatus {
    pub fn spent(&self) -> bool {
        self.used >= self.budget.monthly_limit
    }
    /// 80 % used or more.
    pub fn nearly_spent(&self) -> bool {
        self.budget.monthly_limit > 0.0 && self.used >= 0.8 * self.budget.monthly_limit
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct BudgetList {
    pub budgets: Vec<BudgetStatus>,
}

/// Epoch ms of the first instant of the UTC calendar month `now` falls in, and of the next.
pub fn month(now_ms: i64) -> (i64, i64) {
    let days = now_ms.div_euclid(86_400_000);
    let (y, m, _) = civil_from_days(days);
    let start = days_from_civil(y, m, 1) * 86_400_000;
    let (ny, nm) = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
    (start, days_from_civil(ny, nm, 1) * 86_400_000)
}

// Howard Hinnant's algorithms (public domain): days since 1970-01-01 and back.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// The refusal of new work once any of `statuses` is spent: which budget, how much, and
/// when it starts anew. Running turns are not this rule's: it is asked only for new work.
pub fn refusal(statuses: &[BudgetStatus], now_ms: i64) -> Option<ApiError> {
    let spent = statuses.iter().find(|s| s.spent())?;
    let b = &spent.budget;
    let secs = ((spent.resets_at - now_ms) / 1000).max(1) as u64;
    Some(ApiError::too_many(
        format!(
            "{} monthly budget of {} is spent ({} used); new prompts and automation runs are refused until it resets at the start of next month (in {} h), or an admin raises it",
            b.whose(),
            b.metric.words(b.monthly_limit),
            b.metric.words(spent.used),
            secs.div_ceil(3600)
        ),
        secs,
    ))
}

/// The budgets that apply to `user_id`: the deployment's, and theirs (one set for them by
/// name wins over the one for each person).
pub fn applying(all: &[Budget], user_id: &str) -> Vec<Budget> {
    let mut out: Vec<Budget> = Vec::new();
    for b in all {
        let applies = match b.scope {
            BudgetScope::Deployment => true,
            BudgetScope::Person => b.subject == user_id || b.subject == "*",
        };
        if !applies {
            continue;
        }
        let same = |o: &Budget| o.scope == b.scope && o.metric == b.metric;
        match out.iter().position(same) {
            Some(i) if b.subject == user_id => out[i] = b.clone(),
            Some(_) => {}
            None => out.push(b.clone()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn months_are_utc_calendar_months() {
        // 2026-12-05T04:27:09Z
        let now = 1_796_445_229_000;
        let (start, end) = month(now);
        assert_eq!(start, 1_796_083_200_000, "2026-12-01");
        assert_eq!(end, 1_798_761_600_000, "2027-01-01");
        // 2024-02-29 (a leap day) → February 2024.
        let (s, e) = month(1_709_208_000_000);
        assert_eq!((s, e), (1_706_745_600_000, 1_709_251_200_000));
        assert_eq!(month(0), (0, 2_678_400_000));
    }

    fn status(metric: BudgetMetric, limit: f64, used: f64) -> BudgetStatus {
        BudgetStatus {
            budget: Budget {
                scope: BudgetScope::Person,
                subject: "*".into(),
                metric,
                monthly_limit: limit,
            },
            used,
            resets_at: 10 * 3_600_000,
        }
    }

    #[test]
    fn a_spent_budget_refuses_and_says_which_and_when() {
        assert!(refusal(&[status(BudgetMetric::Tokens, 1000.0, 999.0)], 0).is_none());
        assert!(status(BudgetMetric::Tokens, 1000.0, 800.0).nearly_spent());
        let why = refusal(
            &[
                status(BudgetMetric::Tokens, 1000.0, 10.0),
                status(BudgetMetric::CostUsd, 5.0, 5.25),
            ],
            0,
        )
        .unwrap();
        assert_eq!(why.status(), 429);
        assert!(
            why.message.contains("$5.00 of model cost"),
            "{}",
            why.message
        );
        assert!(why.message.contains("$5.25"), "{}", why.message);
        assert!(why.message.contains("in 10 h"), "{}", why.message);
        assert_eq!(why.retry_after, Some(36_000));
    }

    #[test]
    fn budgets_are_checked_when_set() {
        let b = |scope, subject: &str, limit: f64| Budget {
            scope,
            subject: subject.into(),
            metric: BudgetMetric::Tokens,
            monthly_limit: limit,
        };
        assert!(b(BudgetScope::Person, "github:1", 10.0).check().is_ok());
        assert!(b(BudgetScope::Person, "*", 10.0).check().is_ok());
        assert_eq!(
            b(BudgetScope::Deployment, "x", 0.0)
                .check()
                .unwrap()
                .subject,
            ""
        );
        assert!(b(BudgetScope::Person, "", 10.0).check().is_err());
        assert!(b(BudgetScope::Person, "a b:c", 10.0).check().is_err());
        assert!(b(BudgetScope::Person, "*", -1.0).check().is_err());
        assert!(b(BudgetScope::Person, "*", f64::NAN).check().is_err());
        assert!(b(BudgetScope::Person, "*", 1e20).check().is_err());
    }

    #[test]
    fn a_persons_own_budget_wins_over_everyones() {
        let b = |scope, subject: &str, metric, limit| Budget {
            scope,
            subject: subject.into(),
            metric,
            monthly_limit: limit,
        };
        let all = vec![
            b(BudgetScope::Deployment, "", BudgetMetric::CostUsd, 100.0),
            b(BudgetScope::Person, "*", BudgetMetric::Tokens, 10.0),
            b(BudgetScope::Person, "github:1", BudgetMetric::Tokens, 50.0),
            b(
                BudgetScope::Person,
                "github:2",
                BudgetMetric::SandboxHours,
                1.0,
            ),
        ];
        let mine = applying(&all, "github:1");
        assert_eq!(mine.len(), 2);
        assert_eq!(mine[1].monthly_limit, 50.0);
        let theirs = applying(&all, "github:3");
        assert_eq!(theirs.len(), 2);
        assert_eq!(theirs[1].monthly_limit, 10.0);
    }
}
