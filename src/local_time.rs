//! Times as people write and read them: the platform's time zone ([`TimeZone`], `[index]
//! time_zone`, UTC+8 unless set), the forms a time may take on the command line and in the
//! API's query parameters ([`TimeZone::parse`]), and times printed for people
//! ([`TimeZone::format`]).
//!
//! A zone is a fixed offset from UTC. A news platform works in one zone, and China (the default)
//! has no daylight saving time; a zone database would add a dependency and yearly updates for
//! nothing the platform needs.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use time::format_description::well_known::Rfc3339;
use time::macros::{format_description, offset, time};
use time::{Date, OffsetDateTime, PrimitiveDateTime, Time, UtcOffset};

use crate::forest::Timestamp;

/// The event times accepted: 1970-01-01 to 2106-02-07 (what fits in u32 seconds). A number far
/// beyond is almost always milliseconds, which would otherwise move the clock millennia ahead
/// and expire every cluster.
pub const TIME_RANGE: std::ops::RangeInclusive<Timestamp> = 0..=u32::MAX as Timestamp;

/// A fixed offset from UTC: the zone in which a date or time written without one is read, and
/// in which the command line prints times.
///
/// Written `+08:00`, `-05:00`, `+05:30` or `UTC` (also `+8`, `+0800`, `UTC+8`, `Z`).
///
/// ```
/// use tantivy_dedup::local_time::{RangeEnd, TimeZone};
///
/// let zone: TimeZone = "+08:00".parse()?;
/// assert_eq!(zone, TimeZone::default());
/// // A date alone is the first second of that day in the zone, or its last one as an end.
/// assert_eq!(zone.parse("2024-04-21", RangeEnd::Start)?, 1_713_628_800);
/// assert_eq!(zone.parse("2024-04-21", RangeEnd::End)?, 1_713_628_800 + 86_399);
/// assert_eq!(zone.parse("2024-04-21 08:30", RangeEnd::Start)?, 1_713_659_400);
/// assert_eq!(zone.format(1_713_659_400), "2024-04-21T08:30:00+08:00");
/// assert_eq!(TimeZone::UTC.format(1_713_659_400), "2024-04-21T00:30:00Z");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeZone(UtcOffset);

/// A date given alone means a whole day: which end of a range it bounds says which second of
/// that day it is, so that `--from 2024-04-21 --to 2024-04-21` is that whole day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeEnd {
    /// A lower bound (`from`): a date alone is its first second, 00:00:00.
    Start,
    /// An upper bound, inclusive (`to`): a date alone is its last second, 23:59:59.
    End,
}

/// A time that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeError {
    /// The text has none of the accepted forms.
    #[error(
"{text:?} is not a time: {}", .zone.accepted_forms()
    )]
    Form {
        /// What was given.
        text: String,
        /// The zone a time without an offset is read in.
        zone: TimeZone,
    },
    /// The time is before 1970 or after 2106 (the times an index holds).
    #[error("{text:?} is outside the times an index holds (1970 to 2106){hint}")]
    Range {
        /// What was given.
        text: String,
        /// A hint when the number looks like milliseconds.
        hint: &'static str,
    },
}

impl Default for TimeZone {
    fn default() -> Self {
        TimeZone::CHINA
    }
}

impl TimeZone {
    /// UTC+8, China's time: the default, the zone of the platform's readers and editors.
    pub const CHINA: TimeZone = TimeZone(offset!(+8));
    /// UTC.
    pub const UTC: TimeZone = TimeZone(UtcOffset::UTC);

    /// The offset from UTC.
    pub fn offset(self) -> UtcOffset {
        self.0
    }

    /// `time` (Unix seconds) as RFC 3339 in this zone, `2024-04-21T08:30:00+08:00`; the bare
    /// number when the year has more than four digits.
    pub fn format(self, time: Timestamp) -> String {
        OffsetDateTime::from_unix_timestamp(time)
            .ok()
            .and_then(|utc| utc.to_offset(self.0).format(&Rfc3339).ok())
            .unwrap_or_else(|| time.to_string())
    }

    /// The forms [`parse`](Self::parse) reads, for error messages.
    pub fn accepted_forms(self) -> String {
        format!(
            "write a date (2024-04-21, 2024/04/21 or 20240421), a date and time (2024-04-21 \
             08:30 or 2024-04-21 08:30:15), both read in {self}, a time with its offset (RFC \
             3339: 2024-04-21T08:30:00+08:00) or Unix seconds (1713659400)"
        )
    }

    /// Reads a time given by a person or an export: Unix seconds, RFC 3339 (with its own
    /// offset), or a date (`2024-04-21`, `2024/04/21`, `20240421`) or a date and time
    /// (`2024-04-21 08:30`, `2024/04/21 08:30:15`, `2024-04-21T08:30:15`) in this zone. Eight
    /// digits that form a calendar date are that date, not seconds. A date alone is the first second of the day for a [`RangeEnd::Start`] and the last
    /// one for a [`RangeEnd::End`]. The result must lie within [`TIME_RANGE`].
    pub fn parse(self, text: &str, end: RangeEnd) -> Result<Timestamp, TimeError> {
        let trimmed = text.trim();
        let time = self.read(trimmed, end).ok_or_else(|| TimeError::Form {
            text: trimmed.to_owned(),
            zone: self,
        })?;
        if TIME_RANGE.contains(&time) {
            return Ok(time);
        }
        Err(TimeError::Range {
            text: trimmed.to_owned(),
            hint: if time > 1_000 * u32::MAX as Timestamp / 100 {
                "; milliseconds? give seconds"
            } else {
                ""
            },
        })
    }

    fn read(self, text: &str, end: RangeEnd) -> Option<Timestamp> {
        let in_zone = |time: PrimitiveDateTime| time.assume_offset(self.0).unix_timestamp();
        let day = |date: Date| {
            let time = match end {
                RangeEnd::Start => Time::MIDNIGHT,
                RangeEnd::End => time!(23:59:59),
            };
            in_zone(PrimitiveDateTime::new(date, time))
        };
        if text.bytes().all(|byte| byte.is_ascii_digit()) {
            // Eight digits that make a calendar date are one (`20240421`, the compact form
            // many exports use): as seconds they would be a day of 1970-1973, never a news
            // article's.
            if text.len() == 8
                && let Ok(date) = Date::parse(text, format_description!("[year][month][day]"))
            {
                return Some(day(date));
            }
            return text.parse().ok();
        }
        if let Ok(time) = OffsetDateTime::parse(text, &Rfc3339) {
            return Some(time.unix_timestamp());
        }
        // `2024/04/21` is written as often as `2024-04-21`.
        let text = text.replace('/', "-");
        if let Ok(date) = Date::parse(&text, format_description!("[year]-[month]-[day]")) {
            return Some(day(date));
        }
        // `2024-04-21T08:30` is ISO 8601 for the same local time as `2024-04-21 08:30`.
        let spaced = text.replacen(['T', 't'], " ", 1);
        PrimitiveDateTime::parse(
            &spaced,
            format_description!("[year]-[month]-[day] [hour]:[minute]:[second]"),
        )
        .or_else(|_| {
            PrimitiveDateTime::parse(
                &spaced,
                format_description!("[year]-[month]-[day] [hour]:[minute]"),
            )
        })
        .ok()
        .map(in_zone)
    }
}

impl fmt::Display for TimeZone {
    /// `+08:00`, `-05:30`, `+00:00`: the form settings files and `--time-zone` take.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (hours, minutes, _) = self.0.as_hms();
        let sign = if self.0.is_negative() { '-' } else { '+' };
        write!(
            formatter,
            "{sign}{:02}:{:02}",
            hours.unsigned_abs(),
            minutes.unsigned_abs()
        )
    }
}

impl FromStr for TimeZone {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let problem = || {
            format!(
                "a time zone is an offset from UTC such as \"+08:00\" (China), \"+05:30\", \
                 \"-05:00\" or \"UTC\"; got {text:?}"
            )
        };
        let trimmed = text.trim();
        let upper = trimmed.to_ascii_uppercase();
        let offset = upper
            .strip_prefix("UTC")
            .or_else(|| upper.strip_prefix("GMT"))
            .unwrap_or(&upper);
        if (offset.is_empty() && !upper.is_empty()) || offset == "Z" {
            return Ok(TimeZone::UTC);
        }
        let (negative, digits) = match (offset.strip_prefix('+'), offset.strip_prefix('-')) {
            (Some(digits), _) => (false, digits),
            (_, Some(digits)) => (true, digits),
            _ => return Err(problem()),
        };
        let (hours, minutes) = match digits.split_once(':') {
            Some((hours, minutes)) => (hours, minutes),
            None if digits.len() == 4 => digits.split_at(2),
            None => (digits, "0"),
        };
        let number = |text: &str, max: i8| {
            (!text.is_empty() && text.len() <= 2 && text.bytes().all(|b| b.is_ascii_digit()))
                .then(|| text.parse::<i8>().ok())
                .flatten()
                .filter(|value| *value <= max)
        };
        let (Some(hours), Some(minutes)) = (number(hours, 23), number(minutes, 59)) else {
            return Err(problem());
        };
        let sign = if negative { -1 } else { 1 };
        UtcOffset::from_hms(sign * hours, sign * minutes, 0)
            .map(TimeZone)
            .map_err(|_| problem())
    }
}

impl Serialize for TimeZone {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for TimeZone {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHINA: TimeZone = TimeZone::CHINA;
    /// 2024-04-21T00:00:00+08:00.
    const DAY: Timestamp = 1_713_628_800;

    #[test]
    fn every_accepted_form() {
        for (text, end, expected) in [
            ("1713659400", RangeEnd::Start, 1_713_659_400),
            (" 1713659400 ", RangeEnd::End, 1_713_659_400),
            (
                "2024-04-21T08:30:00+08:00",
                RangeEnd::Start,
                DAY + 8 * 3600 + 1800,
            ),
            ("2024-04-21T00:30:00Z", RangeEnd::End, DAY + 8 * 3600 + 1800),
            ("2024-04-21", RangeEnd::Start, DAY),
            ("2024-04-21", RangeEnd::End, DAY + 86_399),
            ("2024-04-21 08:30", RangeEnd::Start, DAY + 8 * 3600 + 1800),
            ("2024-04-21 08:30", RangeEnd::End, DAY + 8 * 3600 + 1800),
            (
                "2024-04-21 08:30:15",
                RangeEnd::Start,
                DAY + 8 * 3600 + 1815,
            ),
            (
                "2024-04-21T08:30:15",
                RangeEnd::Start,
                DAY + 8 * 3600 + 1815,
            ),
            ("2024/04/21", RangeEnd::Start, DAY),
            ("2024/04/21 08:30", RangeEnd::Start, DAY + 8 * 3600 + 1800),
            ("20240421", RangeEnd::Start, DAY),
            ("20240421", RangeEnd::End, DAY + 86_399),
            // Eight digits that are no calendar date stay seconds.
            ("20241321", RangeEnd::Start, 20_241_321),
            ("12345678", RangeEnd::Start, 12_345_678),
        ] {
            assert_eq!(CHINA.parse(text, end), Ok(expected), "{text}");
        }
        // The zone moves dates and local times, never a time with its own offset.
        let utc = TimeZone::UTC;
        assert_eq!(utc.parse("2024-04-21", RangeEnd::Start), Ok(DAY + 8 * 3600));
        assert_eq!(
            utc.parse("2024-04-21T08:30:00+08:00", RangeEnd::Start),
            CHINA.parse("2024-04-21T08:30:00+08:00", RangeEnd::Start)
        );
    }

    #[test]
    fn errors_name_the_accepted_forms() {
        for text in [
            "yesterday",
            "2024-4-21",
            "2024-02-30",
            "21/04/2024",
            "",
            "-5",
        ] {
            let message = CHINA.parse(text, RangeEnd::Start).unwrap_err().to_string();
            assert!(
                message.contains("2024-04-21 08:30")
                    && message.contains("+08:00")
                    && message.contains("Unix seconds"),
                "{text}: {message}"
            );
        }
        let message = CHINA
            .parse("1713659400000", RangeEnd::Start)
            .unwrap_err()
            .to_string();
        assert!(message.contains("1970 to 2106") && message.contains("milliseconds"));
        let message = CHINA
            .parse("1960-01-01", RangeEnd::Start)
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("1970 to 2106") && !message.contains("milliseconds"),
            "{message}"
        );
    }

    #[test]
    fn zones_are_written_as_offsets() {
        for (text, shown) in [
            ("+08:00", "+08:00"),
            ("+8", "+08:00"),
            ("UTC+8", "+08:00"),
            ("+0800", "+08:00"),
            ("-05:30", "-05:30"),
            ("utc", "+00:00"),
            ("Z", "+00:00"),
            ("+00:00", "+00:00"),
        ] {
            let zone: TimeZone = text.parse().unwrap();
            assert_eq!(zone.to_string(), shown, "{text}");
            assert_eq!(shown.parse::<TimeZone>(), Ok(zone));
        }
        for text in ["Asia/Shanghai", "+24:00", "+08:60", "8", "", "+", "+08:0:0"] {
            let message = text.parse::<TimeZone>().unwrap_err();
            assert!(message.contains("\"+08:00\""), "{text}: {message}");
        }
    }

    #[test]
    fn times_print_in_the_zone() {
        assert_eq!(CHINA.format(DAY), "2024-04-21T00:00:00+08:00");
        let west: TimeZone = "-05:00".parse().unwrap();
        assert_eq!(west.format(DAY), "2024-04-20T11:00:00-05:00");
    }
}
