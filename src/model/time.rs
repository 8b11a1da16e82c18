//! Times of session turns: seconds since the Unix epoch (UTC) in records,
//! RFC 3339 text at the edges (`2023-05-18T13:47:00Z`, an offset such as
//! `+02:00`, or a plain date `2023-05-18` for its midnight UTC).

use crate::error::{Error, Result};

/// The seconds since the Unix epoch that `text` names (RFC 3339 with an
/// offset, or a plain `YYYY-MM-DD` date for its midnight UTC); a
/// [`Error::Usage`] naming the text otherwise (a time of day without an
/// offset is refused, not read as midnight or as UTC).
pub fn parse(text: &str) -> Result<i64> {
    let text = text.trim();
    let plain_date = text.len() == 10 && text.bytes().filter(|&b| b == b'-').count() == 2;
    let instant = text.parse::<jiff::Timestamp>().or_else(|error| {
        if !plain_date {
            return Err(error);
        }
        text.parse::<jiff::civil::Date>()
            .and_then(|date| date.to_zoned(jiff::tz::TimeZone::UTC))
            .map(|zoned| zoned.timestamp())
            .map_err(|_| error)
    });
    instant.map(|t| t.as_second()).map_err(|error| {
        Error::Usage(format!(
            "{text:?} is not a time: give RFC 3339 (2023-05-18T13:47:00Z) or a date (2023-05-18): {error}"
        ))
    })
}

/// `at` (seconds since the Unix epoch) as RFC 3339 in UTC; a time outside
/// what RFC 3339 can write (before year -9999 or after 9999) as the number
/// of seconds.
pub fn format(at: i64) -> String {
    jiff::Timestamp::from_second(at).map_or_else(|_| at.to_string(), |t| t.to_string())
}

/// Serialises an optional time as RFC 3339 text (or null), for records
/// whose `at` field JSON readers see.
pub fn serialize_at<S: serde::Serializer>(
    at: &Option<i64>,
    serializer: S,
) -> std::result::Result<S::Ok, S::Error> {
    match at {
        Some(at) => serializer.serialize_str(&format(*at)),
        None => serializer.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_3339_and_dates_round_trip_in_utc() {
        let at = parse("2023-05-18T13:47:00Z").unwrap();
        assert_eq!(at, 1_684_417_620);
        assert_eq!(format(at), "2023-05-18T13:47:00Z");
        assert_eq!(parse("2023-05-18T15:47:00+02:00").unwrap(), at);
        assert_eq!(parse("2023-05-18T13:47:00.750Z").unwrap(), at);
        assert_eq!(parse("2023-05-18").unwrap(), 1_684_368_000);
        // Outside what RFC 3339 writes: the number, never a panic.
        assert_eq!(format(i64::MAX), i64::MAX.to_string());
        assert_eq!(format(i64::MIN), i64::MIN.to_string());
        let no_offset = "2023-05-18T13:47:00";
        for bad in [
            "yesterday",
            "2023-13-01",
            "18 May 2023",
            "",
            no_offset,
            "2023-05-18 13:47",
        ] {
            let err = parse(bad).unwrap_err().to_string();
            assert!(err.contains("not a time") && err.contains(bad), "{err}");
        }
    }
}
