//! UTC timestamps in RFC 3339 with milliseconds, without a date-time dependency.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

thread_local! {
    /// The last second formatted on this thread, and its text up to the seconds: most
    /// requests only append the milliseconds.
    static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
}

thread_local! {
    /// The last second written as an HTTP date on this thread, and its text.
    static HTTP_DATE: RefCell<(u64, [u8; 29])> = const { RefCell::new((u64::MAX, [0; 29])) };
}

/// Now as an HTTP date (RFC 9110 IMF-fixdate): `Sun, 06 Nov 1994 08:49:37 GMT`.
pub(crate) fn http_date_now() -> [u8; 29] {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    HTTP_DATE.with_borrow_mut(|(second, text)| {
        if *second != secs {
            *second = secs;
            *text = imf_fixdate(secs);
        }
        *text
    })
}

fn imf_fixdate(secs: u64) -> [u8; 29] {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    let weekday = DAYS[usize::try_from(days % 7).unwrap_or(0)];
    let month = MONTHS[usize::try_from(month - 1).unwrap_or(0) % 12];
    let text = format!(
        "{weekday}, {day:02} {month} {year:04} {:02}:{:02}:{:02} GMT",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
    );
    let mut out = [b' '; 29];
    let n = text.len().min(29);
    out[..n].copy_from_slice(&text.as_bytes()[..n]);
    out
}

/// Appends `at` as `2026-01-02T03:04:05.678Z`.
#[cfg(test)]
pub(crate) fn rfc3339(out: &mut Vec<u8>, at: SystemTime) {
    rfc3339_since_epoch(out, at.duration_since(UNIX_EPOCH).unwrap_or_default());
}

/// Appends the time `since` the Unix epoch as [`rfc3339`] does.
pub(crate) fn rfc3339_since_epoch(out: &mut Vec<u8>, since: std::time::Duration) {
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != since.as_secs() {
            *second = since.as_secs();
            *text = up_to_seconds(*second);
        }
        out.extend_from_slice(text.as_bytes());
    });
    let millis = since.subsec_millis();
    let digits = [
        b'.',
        digit(millis / 100),
        digit(millis / 10 % 10),
        digit(millis % 10),
        b'Z',
    ];
    out.extend_from_slice(&digits);
}

fn digit(n: u32) -> u8 {
    b'0' + u8::try_from(n % 10).unwrap_or(0)
}

/// `2026-01-02T03:04:05`.
fn up_to_seconds(secs: u64) -> String {
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month, day).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(secs: u64, millis: u64) -> String {
        let mut out = Vec::new();
        rfc3339(
            &mut out,
            UNIX_EPOCH + Duration::from_millis(secs * 1000 + millis),
        );
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn timestamps_are_utc_with_milliseconds() {
        assert_eq!(at(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(at(951_782_400, 5), "2000-02-29T00:00:00.005Z");
        assert_eq!(at(1_798_761_599, 999), "2026-12-31T23:59:59.999Z");
    }

    #[test]
    fn http_dates_are_imf_fixdates() {
        let at = |secs| String::from_utf8(imf_fixdate(secs).to_vec()).unwrap();
        assert_eq!(at(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(at(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(at(1_795_737_600), "Fri, 27 Nov 2026 00:00:00 GMT");
        assert_eq!(at(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
