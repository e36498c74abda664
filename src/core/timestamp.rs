//! Timestamps written exactly as chrono writes them (RFC 3339 in UTC with `Z`, the fraction in 3, 6 or 9 digits),
//! but on the stack and in one piece: each save of a busy session writes some two dozen of them (its history tail),
//! and chrono's formatter, called through serde_json's escaping writer a character at a time, took 120 ns each.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Serialize, Serializer};

/// For `#[serde(serialize_with = ...)]`: the same text as chrono's own `Serialize`.
pub fn serialize<S: Serializer>(at: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut text = [0u8; 30];
    match write_rfc3339(at, &mut text) {
        Some(len) => s.serialize_str(std::str::from_utf8(&text[..len]).expect("digits and separators are ASCII")),
        // A year outside 0000-9999 or a leap second: chrono's own rules for those, at chrono's own speed.
        None => at.serialize(s),
    }
}

/// `2026-11-25T17:26:59.242Z`: the fraction in 3, 6 or 9 digits, whichever is exact, or none. `None` for what chrono
/// writes otherwise (a signed year, a leap second's `:60`).
fn write_rfc3339(at: &DateTime<Utc>, out: &mut [u8; 30]) -> Option<usize> {
    let year = at.year();
    let nano = at.nanosecond();
    if !(0..=9999).contains(&year) || nano >= 1_000_000_000 {
        return None;
    }
    let mut text = Text { out, len: 0 };
    text.digits(year as u32, 4).byte(b'-').digits(at.month(), 2).byte(b'-').digits(at.day(), 2).byte(b'T');
    text.digits(at.hour(), 2).byte(b':').digits(at.minute(), 2).byte(b':').digits(at.second(), 2);
    if nano != 0 {
        text.byte(b'.');
        if nano % 1_000_000 == 0 {
            text.digits(nano / 1_000_000, 3)
        } else if nano % 1_000 == 0 {
            text.digits(nano / 1_000, 6)
        } else {
            text.digits(nano, 9)
        };
    }
    Some(text.byte(b'Z').len)
}

struct Text<'a> {
    out: &'a mut [u8; 30],
    len: usize,
}

impl Text<'_> {
    fn byte(&mut self, b: u8) -> &mut Self {
        self.out[self.len] = b;
        self.len += 1;
        self
    }

    /// `value`'s last `count` digits, zero-padded.
    fn digits(&mut self, value: u32, count: u32) -> &mut Self {
        for place in (0..count).rev() {
            self.byte(b'0' + (value / 10u32.pow(place) % 10) as u8);
        }
        self
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[derive(Serialize)]
    struct Ours(#[serde(serialize_with = "serialize")] DateTime<Utc>);

    fn same_as_chrono(at: DateTime<Utc>) {
        let chrono = serde_json::to_string(&at).unwrap();
        assert_eq!(serde_json::to_string(&Ours(at)).unwrap(), chrono, "for {at:?}");
    }

    #[test]
    fn every_kind_of_fraction_and_the_years_and_seconds_chrono_writes_its_own_way() {
        let base = Utc.with_ymd_and_hms(2026, 11, 25, 17, 26, 59).unwrap();
        for nano in [0, 1, 999_999_999, 242_000_000, 1_000_000, 5_000, 242_500_000, 7, 100_000_000, 10] {
            same_as_chrono(base.with_nanosecond(nano).unwrap());
        }
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31).unwrap().and_hms_nano_opt(23, 59, 59, 1_500_000_000);
        same_as_chrono(leap.unwrap().and_utc());
        for year in [-1, 0, 1, 999, 9999, 10_000, -262_000] {
            same_as_chrono(Utc.with_ymd_and_hms(year, 1, 2, 3, 4, 5).unwrap());
        }
        same_as_chrono(DateTime::<Utc>::MIN_UTC);
        same_as_chrono(DateTime::<Utc>::MAX_UTC);
    }

    proptest::proptest! {
        #[test]
        fn any_instant_is_written_as_chrono_writes_it(
            secs in -62_167_219_200i64..253_402_300_800,
            nano in 0u32..1_000_000_000,
            precision in 0u32..4,
        ) {
            // Whole seconds, milliseconds, microseconds or nanoseconds: each fraction length.
            let nano = nano - nano % [1_000_000_000, 1_000_000, 1_000, 1][precision as usize];
            same_as_chrono(DateTime::from_timestamp(secs, nano).unwrap());
        }
    }
}
