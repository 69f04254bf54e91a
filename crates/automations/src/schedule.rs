//! When a schedule fires: a 5-field cron read in an IANA time zone, by `croner`, the zone
//! as the platform knows it ([`Zone`]: no calendar arithmetic of ours).

use crate::zone::Zone;
use chrono::{DateTime, TimeZone};
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use inspect_protocol::automations::{Schedule, MIN_SCHEDULE_INTERVAL_MINUTES};
use inspect_protocol::ApiError;

/// The longest cron text.
const MAX_CRON_CHARS: usize = 100;
/// Firings looked at to find the shortest gap between two.
const GAP_SAMPLE: usize = 1_000;

/// A schedule that can be evaluated.
#[derive(Debug, Clone)]
pub struct Parsed {
    cron: Cron,
    zone: Zone,
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message)
}

/// Checks a schedule being saved: exactly five fields (minute hour day-of-month month
/// day-of-week), a known time zone, and at least [`MIN_SCHEDULE_INTERVAL_MINUTES`] between
/// two firings (looked for over the next firings: a check for saving, not for every tick).
pub fn parse(schedule: &Schedule, now_ms: i64) -> Result<Parsed, ApiError> {
    let parsed = read(schedule)?;
    let text = schedule.cron.trim();
    if parsed.next_after(now_ms).is_none() {
        return Err(bad(format!("the cron {text:?} never fires")));
    }
    if let Some(gap) = parsed.shortest_gap_minutes(now_ms) {
        if gap < MIN_SCHEDULE_INTERVAL_MINUTES {
            return Err(bad(format!(
                "the cron {text:?} fires {gap} minute(s) apart; the shortest interval is {MIN_SCHEDULE_INTERVAL_MINUTES} minutes"
            )));
        }
    }
    Ok(parsed)
}

/// Reads a schedule that was checked when it was saved (its five fields and its zone).
pub fn read(schedule: &Schedule) -> Result<Parsed, ApiError> {
    let text = schedule.cron.trim();
    if text.chars().count() > MAX_CRON_CHARS || text.chars().any(char::is_control) {
        return Err(bad(format!(
            "a schedule's cron is at most {MAX_CRON_CHARS} characters on one line"
        )));
    }
    let fields = text.split_whitespace().count();
    if fields != 5 {
        return Err(bad(format!(
            "a schedule's cron has five fields (minute hour day-of-month month day-of-week); {text:?} has {fields}"
        )));
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| bad(format!("the cron {text:?} is not valid: {e}")))?;
    let zone = Zone::named(&schedule.timezone).ok_or_else(|| {
        bad(format!(
            "unknown time zone {:?}: use an IANA name such as UTC or Europe/Paris",
            schedule.timezone
        ))
    })?;
    Ok(Parsed { cron, zone })
}

impl Parsed {
    fn at(&self, ms: i64) -> Option<DateTime<Zone>> {
        self.zone.timestamp_millis_opt(ms).single()
    }

    /// The first firing strictly after `ms` (ms since the epoch).
    pub fn next_after(&self, ms: i64) -> Option<i64> {
        let from = self.at(ms)?;
        self.cron
            .find_next_occurrence(&from, false)
            .ok()
            .map(|t| t.timestamp_millis())
    }

    /// The next `n` firings after `ms`.
    pub fn upcoming(&self, ms: i64, n: usize) -> Vec<i64> {
        let mut out = Vec::with_capacity(n);
        let mut at = ms;
        while out.len() < n {
            match self.next_after(at) {
                Some(next) => {
                    out.push(next);
                    at = next;
                }
                None => break,
            }
        }
        out
    }

    /// The shortest time between two of the next firings, in whole minutes.
    fn shortest_gap_minutes(&self, ms: i64) -> Option<i64> {
        self.upcoming(ms, GAP_SAMPLE)
            .windows(2)
            .map(|w| (w[1] - w[0]) / 60_000)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-04T10:07:00Z.
    const NOW: i64 = 1_796_378_820_000;

    fn schedule(cron: &str, tz: &str) -> Schedule {
        Schedule {
            cron: cron.into(),
            timezone: tz.into(),
        }
    }

    fn refused(cron: &str, tz: &str) -> String {
        parse(&schedule(cron, tz), NOW).unwrap_err().message
    }

    #[test]
    fn fires_on_its_minutes_in_its_zone() {
        let daily = parse(&schedule("0 9 * * *", "Europe/Paris"), NOW).unwrap();
        // 09:00 in Paris in December is 08:00 UTC: tomorrow's, as today's has passed.
        assert_eq!(daily.next_after(NOW), Some(1_796_457_600_000));
        let utc = parse(&schedule("30 14 * * 1-5", "UTC"), NOW).unwrap();
        assert_eq!(utc.next_after(NOW), Some(1_796_394_600_000));
        let quarter = parse(&schedule("*/15 * * * *", "UTC"), NOW).unwrap();
        assert_eq!(
            quarter.upcoming(NOW, 3),
            vec![NOW + 8 * 60_000, NOW + 23 * 60_000, NOW + 38 * 60_000]
        );
    }

    #[test]
    fn daylight_saving_moves_the_utc_time_not_the_local_one() {
        // New York, 9:00 local: 14:00 UTC in winter, 13:00 UTC after 8 March 2027.
        let s = parse(&schedule("0 9 * * *", "America/New_York"), NOW).unwrap();
        let winter = s.next_after(NOW).unwrap();
        assert_eq!((winter / 3_600_000) % 24, 14);
        // 2027-03-15T00:00Z.
        let summer = s.next_after(1_805_068_800_000).unwrap();
        assert_eq!((summer / 3_600_000) % 24, 13);
    }

    #[test]
    fn refuses_what_is_not_a_five_field_cron_in_a_known_zone() {
        assert!(refused("0 0 9 * * *", "UTC").contains("five fields"));
        assert!(refused("0 9 * *", "UTC").contains("five fields"));
        assert!(refused("61 9 * * *", "UTC").contains("not valid"));
        assert!(refused("0 9 * * *", "Mars/Olympus").contains("unknown time zone"));
        assert!(refused("0 9 31 2 *", "UTC").contains("never fires"));
        assert!(refused(&"1 ".repeat(60), "UTC").contains("at most"));
        assert!(refused("0 9 * * *\n0", "UTC").contains("one line"));
    }

    #[test]
    fn refuses_firings_closer_than_fifteen_minutes() {
        assert!(refused("*/5 * * * *", "UTC").contains("5 minute(s) apart"));
        assert!(refused("0,10 9 * * *", "UTC").contains("10 minute(s) apart"));
        // Across the hour: 9:55 then 10:00.
        assert!(refused("0,55 9,10 * * *", "UTC").contains("5 minute(s) apart"));
        assert!(parse(&schedule("*/15 * * * *", "UTC"), NOW).is_ok());
        assert!(parse(&schedule("0 0 1 * *", "Asia/Tokyo"), NOW).is_ok());
    }
}
