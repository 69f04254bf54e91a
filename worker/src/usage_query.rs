//! `GET /usage`'s query, read and checked (pure): how to group, which sessions (made from
//! `since` to `until`, 30 days back by default, a year at most), and whether CSV.

use inspect_protocol::usage::UsageGroup;
use inspect_protocol::ApiError;

pub const DAY_MS: i64 = 24 * 60 * 60 * 1000;
/// The longest stretch one report covers.
pub const MAX_SPAN_MS: i64 = 366 * DAY_MS;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageQuery {
    pub by: UsageGroup,
    pub since: i64,
    pub until: i64,
    pub csv: bool,
}

pub fn parse(pairs: &[(String, String)], now: i64) -> Result<UsageQuery, ApiError> {
    let mut q = UsageQuery {
        by: UsageGroup::Person,
        since: now - 30 * DAY_MS,
        until: now + 1,
        csv: false,
    };
    let number = |k: &str, v: &str| {
        v.parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| ApiError::bad_request(format!("{k} is a time in epoch milliseconds")))
    };
    for (k, v) in pairs {
        match k.as_str() {
            "by" => {
                q.by = UsageGroup::parse(v).ok_or_else(|| {
                    ApiError::bad_request("by is person, repository, week or source")
                })?
            }
            "since" => q.since = number(k, v)?,
            "until" => q.until = number(k, v)?,
            "format" => match v.as_str() {
                "csv" => q.csv = true,
                "json" => q.csv = false,
                _ => return Err(ApiError::bad_request("format is json or csv")),
            },
            other => {
                return Err(ApiError::bad_request(format!(
                    "unknown parameter {other:?}: by, since, until, format"
                )))
            }
        }
    }
    if q.until <= q.since {
        return Err(ApiError::bad_request("until must come after since"));
    }
    if q.until - q.since > MAX_SPAN_MS {
        return Err(ApiError::bad_request("a report covers a year at most"));
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_choices_and_refusals() {
        let now = 400 * DAY_MS;
        let q = parse(&[], now).unwrap();
        assert_eq!(
            (q.by, q.since, q.csv),
            (UsageGroup::Person, now - 30 * DAY_MS, false)
        );
        let q = parse(
            &pairs(&[
                ("by", "week"),
                ("since", "0"),
                ("until", "1000"),
                ("format", "csv"),
            ]),
            now,
        )
        .unwrap();
        assert_eq!(
            (q.by, q.since, q.until, q.csv),
            (UsageGroup::Week, 0, 1000, true)
        );
        for bad in [
            vec![("by", "team")],
            vec![("since", "-1")],
            vec![("since", "x")],
            vec![("since", "10"), ("until", "10")],
            vec![("since", "0"), ("until", &*format!("{}", 400 * DAY_MS))],
            vec![("format", "xml")],
            vec![("limit", "10")],
        ] {
            assert!(parse(&pairs(&bad), now).is_err(), "{bad:?}");
        }
    }
}
