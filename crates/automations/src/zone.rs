//! An IANA time zone as the platform knows it. On the Worker the runtime's own `Intl`
//! answers (its ICU data): the wasm carries no zone database. Natively (the tests, the
//! tools) chrono-tz's does. Either way a zone is only asked one thing — its offset from UTC
//! at an instant — and the rest (a local time's offset, a gap, a repeated hour) is worked
//! out here, once, for both.

use chrono::{
    FixedOffset, LocalResult, NaiveDate, NaiveDateTime, NaiveTime, Offset, TimeZone, Utc,
};
use std::fmt;
use std::sync::Arc;

/// A zone known by name (`Europe/Paris`, `UTC`).
#[derive(Clone, PartialEq, Eq)]
pub struct Zone {
    name: Arc<str>,
}

impl fmt::Debug for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Zone({})", self.name)
    }
}

impl Zone {
    /// The zone of that name, if the platform knows it.
    pub fn named(name: &str) -> Option<Zone> {
        let name = name.trim();
        if name.is_empty() || name.len() > 64 || name.chars().any(|c| c.is_control()) {
            return None;
        }
        backend::offset_seconds(name, 0)?;
        Some(Zone { name: name.into() })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The offset at a UTC instant; a zone the platform stops knowing reads as UTC.
    fn at_utc(&self, utc: &NaiveDateTime) -> FixedOffset {
        let seconds =
            backend::offset_seconds(&self.name, utc.and_utc().timestamp_millis()).unwrap_or(0);
        FixedOffset::east_opt(seconds).unwrap_or(Utc.fix())
    }

    fn offset(&self, fixed: FixedOffset) -> ZoneOffset {
        ZoneOffset {
            zone: self.clone(),
            fixed,
        }
    }
}

/// A zone's offset at some instant (and the zone, to get back to it).
#[derive(Clone)]
pub struct ZoneOffset {
    zone: Zone,
    fixed: FixedOffset,
}

impl fmt::Debug for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}{}", self.zone, self.fixed)
    }
}

impl fmt::Display for ZoneOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.fixed)
    }
}

impl Offset for ZoneOffset {
    fn fix(&self) -> FixedOffset {
        self.fixed
    }
}

impl TimeZone for Zone {
    type Offset = ZoneOffset;

    fn from_offset(offset: &ZoneOffset) -> Zone {
        offset.zone.clone()
    }

    fn offset_from_local_date(&self, local: &NaiveDate) -> LocalResult<ZoneOffset> {
        self.offset_from_local_datetime(&local.and_time(NaiveTime::MIN))
    }

    /// A local time's offset: the zone's offsets a day either side are the candidates (no
    /// zone changes twice in two days); each that maps the local time back to itself holds.
    /// None in a gap (clocks forward), two in a repeated hour (clocks back), earliest first.
    fn offset_from_local_datetime(&self, local: &NaiveDateTime) -> LocalResult<ZoneOffset> {
        let day = chrono::TimeDelta::days(1);
        let around = [*local - day, *local, *local + day];
        let mut found: Vec<(NaiveDateTime, FixedOffset)> = Vec::new();
        for probe in around {
            let candidate = self.at_utc(&probe);
            let utc = *local - candidate;
            if self.at_utc(&utc) == candidate && !found.iter().any(|(u, _)| *u == utc) {
                found.push((utc, candidate));
            }
        }
        found.sort_by_key(|(utc, _)| *utc);
        match found.as_slice() {
            [] => LocalResult::None,
            [(_, one)] => LocalResult::Single(self.offset(*one)),
            [(_, first), .., (_, last)] => {
                LocalResult::Ambiguous(self.offset(*first), self.offset(*last))
            }
        }
    }

    fn offset_from_utc_date(&self, utc: &NaiveDate) -> ZoneOffset {
        self.offset_from_utc_datetime(&utc.and_time(NaiveTime::MIN))
    }

    fn offset_from_utc_datetime(&self, utc: &NaiveDateTime) -> ZoneOffset {
        self.offset(self.at_utc(utc))
    }
}

/// The zone database: the runtime's `Intl` on the Worker.
#[cfg(target_arch = "wasm32")]
mod backend {
    use std::cell::RefCell;
    use std::collections::HashMap;
    use wasm_bindgen::{JsCast, JsValue};

    thread_local! {
        /// One formatter per zone (making one is the slow part); none for a zone `Intl`
        /// refused.
        static FORMATS: RefCell<HashMap<String, Option<js_sys::Intl::DateTimeFormat>>> =
            RefCell::new(HashMap::new());
    }

    fn formatter(name: &str) -> Option<js_sys::Intl::DateTimeFormat> {
        FORMATS.with(|f| {
            if let Some(known) = f.borrow().get(name) {
                return known.clone();
            }
            let made = make(name);
            f.borrow_mut().insert(name.to_owned(), made.clone());
            made
        })
    }

    /// `new Intl.DateTimeFormat("en-US", {timeZone, hourCycle: "h23", …})`; an unknown
    /// zone is a RangeError, caught (never a trap).
    fn make(name: &str) -> Option<js_sys::Intl::DateTimeFormat> {
        let intl = js_sys::Reflect::get(&js_sys::global(), &"Intl".into()).ok()?;
        let ctor: js_sys::Function = js_sys::Reflect::get(&intl, &"DateTimeFormat".into())
            .ok()?
            .dyn_into()
            .ok()?;
        let options = js_sys::Object::new();
        let set = |k: &str, v: &str| js_sys::Reflect::set(&options, &k.into(), &v.into());
        set("timeZone", name).ok()?;
        set("hourCycle", "h23").ok()?;
        for field in ["year", "month", "day", "hour", "minute", "second"] {
            set(field, "numeric").ok()?;
        }
        let args = js_sys::Array::of2(&JsValue::from_str("en-US"), &options);
        js_sys::Reflect::construct(&ctor, &args)
            .ok()?
            .dyn_into()
            .ok()
    }

    /// The offset at an instant, as `Intl` formats it (whole seconds).
    fn asked(format: &js_sys::Intl::DateTimeFormat, utc_ms: i64) -> Option<i32> {
        let whole = utc_ms.div_euclid(1000) * 1000;
        let date = js_sys::Date::new(&JsValue::from_f64(whole as f64));
        let parts = format.format_to_parts(&date);
        let mut fields = [0i64; 6];
        for part in parts.iter() {
            let kind = js_sys::Reflect::get(&part, &"type".into())
                .ok()?
                .as_string()?;
            let value = js_sys::Reflect::get(&part, &"value".into())
                .ok()?
                .as_string()?;
            let i = match kind.as_str() {
                "year" => 0,
                "month" => 1,
                "day" => 2,
                "hour" => 3,
                "minute" => 4,
                "second" => 5,
                _ => continue,
            };
            fields[i] = value.parse().ok()?;
        }
        let local = chrono::NaiveDate::from_ymd_opt(
            i32::try_from(fields[0]).ok()?,
            u32::try_from(fields[1]).ok()?,
            u32::try_from(fields[2]).ok()?,
        )?
        .and_hms_opt(
            u32::try_from(fields[3]).ok()?,
            u32::try_from(fields[4]).ok()?,
            u32::try_from(fields[5]).ok()?,
        )?;
        i32::try_from((local.and_utc().timestamp_millis() - whole) / 1000).ok()
    }

    /// A UTC day of a zone: one offset all day, or a change at an instant.
    #[derive(Clone, Copy)]
    enum Day {
        Same(i32),
        Changes { at: i64, before: i32, after: i32 },
    }

    const DAY_MS: i64 = 86_400_000;

    thread_local! {
        /// Each zone's days asked so far: a schedule's next thousand firings ask `Intl` a
        /// few dozen times, not tens of thousands.
        static DAYS: RefCell<HashMap<(String, i64), Day>> = RefCell::new(HashMap::new());
    }

    /// A day's offsets: its start's and its end's, and, when they differ, the second it
    /// changes (found by halving; no zone changes twice in a day).
    fn day(format: &js_sys::Intl::DateTimeFormat, index: i64) -> Option<Day> {
        let start = index * DAY_MS;
        let end = start + DAY_MS - 1000;
        let (before, after) = (asked(format, start)?, asked(format, end)?);
        if before == after {
            return Some(Day::Same(before));
        }
        let (mut lo, mut hi) = (start, end);
        while hi - lo > 1000 {
            let mid = lo + ((hi - lo) / 2000) * 1000;
            if asked(format, mid)? == before {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(Day::Changes {
            at: hi,
            before,
            after,
        })
    }

    pub fn offset_seconds(name: &str, utc_ms: i64) -> Option<i32> {
        let index = utc_ms.div_euclid(DAY_MS);
        let key = (name.to_owned(), index);
        let known = DAYS.with(|d| d.borrow().get(&key).copied());
        let found = match known {
            Some(day) => day,
            None => {
                let made = day(&formatter(name)?, index)?;
                DAYS.with(|d| {
                    let mut days = d.borrow_mut();
                    // A bound on what is kept: forgotten wholesale past it.
                    if days.len() > 20_000 {
                        days.clear();
                    }
                    days.insert(key, made);
                });
                made
            }
        };
        Some(match found {
            Day::Same(offset) => offset,
            Day::Changes { at, before, after } => {
                if utc_ms < at {
                    before
                } else {
                    after
                }
            }
        })
    }
}

/// The zone database natively: chrono-tz's.
#[cfg(not(target_arch = "wasm32"))]
mod backend {
    use chrono::{Offset, TimeZone};

    pub fn offset_seconds(name: &str, utc_ms: i64) -> Option<i32> {
        let zone: chrono_tz::Tz = name.parse().ok()?;
        let at = chrono::DateTime::from_timestamp_millis(utc_ms)?.naive_utc();
        Some(zone.offset_from_utc_datetime(&at).fix().local_minus_utc())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn local(s: &str) -> NaiveDateTime {
        NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M").unwrap()
    }

    #[test]
    fn a_local_time_has_one_offset_none_in_a_gap_two_in_a_repeat() {
        let paris = Zone::named("Europe/Paris").unwrap();
        let offset = |s: &str| paris.offset_from_local_datetime(&local(s)).map(|o| o.fix());
        let hours = |h: i32| FixedOffset::east_opt(h * 3600).unwrap();
        assert_eq!(offset("2026-12-04 09:00"), LocalResult::Single(hours(1)));
        assert_eq!(offset("2026-07-04 09:00"), LocalResult::Single(hours(2)));
        // 2026-03-29 02:30 does not exist in Paris; 2026-10-25 02:30 happens twice.
        assert_eq!(offset("2026-03-29 02:30"), LocalResult::None);
        assert_eq!(
            offset("2026-10-25 02:30"),
            LocalResult::Ambiguous(hours(2), hours(1))
        );
        assert!(Zone::named("Mars/Olympus").is_none());
        assert!(Zone::named("").is_none());
        assert_eq!(Zone::named(" UTC ").unwrap().name(), "UTC");
    }
}
