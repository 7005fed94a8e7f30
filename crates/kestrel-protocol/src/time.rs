//! RFC 3339 timestamps in UTC with milliseconds, without a date-time dependency.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

/// A point in time as written in records: `2026-11-29T20:13:24.123Z`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp {
    /// Milliseconds since the Unix epoch.
    pub millis: i64,
}

impl Timestamp {
    pub fn now() -> Self {
        let millis = match SystemTime::now().duration_since(UNIX_EPOCH) {
            Ok(elapsed) => i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX),
            Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
        };
        Self { millis }
    }

    /// (year, month 1-12, day 1-31) in UTC.
    pub fn date(self) -> (i64, u32, u32) {
        civil_from_days(self.millis.div_euclid(86_400_000))
    }

    /// Parses the format `Display` writes (also without milliseconds); `None` otherwise.
    pub fn parse(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        if bytes.len() < 20 || bytes[4] != b'-' || bytes[7] != b'-' || bytes[10] != b'T' {
            return None;
        }
        let number = |range: std::ops::Range<usize>| text.get(range)?.parse::<i64>().ok();
        let (year, month, day) = (number(0..4)?, number(5..7)?, number(8..10)?);
        let (hour, minute, second) = (number(11..13)?, number(14..16)?, number(17..19)?);
        let in_range = (1..=12).contains(&month) && (1..=31).contains(&day);
        if !in_range || hour > 23 || minute > 59 || second > 60 {
            return None;
        }
        let rest = text.get(19..)?;
        let millis_part = match rest.strip_prefix('.') {
            Some(fraction) => {
                let digits = fraction.strip_suffix('Z')?;
                let padded = format!("{digits:0<3}");
                padded.get(0..3)?.parse::<i64>().ok()?
            }
            None if rest == "Z" => 0,
            None => return None,
        };
        let days = days_from_civil(year, u32::try_from(month).ok()?, u32::try_from(day).ok()?);
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second;
        Some(Self { millis: seconds * 1_000 + millis_part })
    }
}

impl Timestamp {
    /// Parses an HTTP date in the IMF-fixdate form RFC 9110 requires senders to use
    /// (`Sun, 06 Nov 1994 08:49:37 GMT`); `None` for anything else.
    pub fn parse_http_date(text: &str) -> Option<Self> {
        let mut parts = text.trim().split(' ');
        let weekday = parts.next()?;
        let (day, month, year, time, zone) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        if parts.next().is_some() || !weekday.ends_with(',') || zone != "GMT" || day.len() != 2 {
            return None;
        }
        const MONTHS: [&str; 12] =
            ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
        let month = MONTHS.iter().position(|name| *name == month)?;
        let (day, year) = (day.parse::<u32>().ok()?, year.parse::<i64>().ok()?);
        let mut clock = time.split(':').map(|part| part.parse::<i64>().ok());
        let (hour, minute, second) = (clock.next()??, clock.next()??, clock.next()??);
        if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 {
            return None;
        }
        if second > 60 {
            return None;
        }
        let days = days_from_civil(year, u32::try_from(month).ok()? + 1, day);
        Some(Self { millis: (days * 86_400 + hour * 3_600 + minute * 60 + second) * 1_000 })
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (year, month, day) = self.date();
        let in_day = self.millis.rem_euclid(86_400_000);
        let (hour, minute) = (in_day / 3_600_000, in_day / 60_000 % 60);
        let (second, milli) = (in_day / 1_000 % 60, in_day % 1_000);
        write!(f, "{year:04}-{month:02}-{day:02}T{hour:02}:{minute:02}:{second:02}.{milli:03}Z")
    }
}

impl Serialize for Timestamp {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Timestamp::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("not an RFC 3339 UTC time: {text}")))
    }
}

// Howard Hinnant's civil-date algorithms (public domain).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_round_trip() {
        let stamp = Timestamp { millis: 1_796_156_004_123 };
        let text = stamp.to_string();
        assert_eq!(text, "2026-12-01T20:13:24.123Z");
        assert_eq!(Timestamp::parse(&text), Some(stamp));
        assert_eq!(stamp.date(), (2026, 12, 1));
    }

    #[test]
    fn parses_http_dates_and_rejects_other_forms() {
        let date = Timestamp::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(date.to_string(), "1994-11-06T08:49:37.000Z");
        for bad in [
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "120",
            "",
        ] {
            assert_eq!(Timestamp::parse_http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn parses_without_fraction_and_rejects_garbage() {
        assert_eq!(Timestamp::parse("1970-01-01T00:00:01Z"), Some(Timestamp { millis: 1_000 }));
        assert_eq!(Timestamp::parse("yesterday"), None);
        assert_eq!(Timestamp::parse("2026-13-01T00:00:00+01:00"), None);
    }
}
