//! Request host normalization: lower-cased, port stripped, trailing dot stripped.

pub(crate) use portico_model::matching::wildcard_suffix;
use std::borrow::Cow;

/// Every suffix after a `.` of `host`, longest first (`a.b.c` → `b.c`, `c`): the suffix
/// wildcards (`*.b.c`, `*.c`) that may match it. None when the host starts with an empty
/// label, as [`portico_model::matching::suffix_matches`] has it.
pub(crate) fn suffixes(host: &str) -> impl Iterator<Item = &str> {
    let labelled = !host.starts_with('.');
    host.match_indices('.')
        .filter(move |_| labelled)
        .map(move |(i, _)| &host[i + 1..])
        .filter(|s| !s.is_empty())
}

/// The host as routing compares it. Borrows unless the host contains upper-case letters.
pub(crate) fn normalize_host(raw: &str) -> Cow<'_, str> {
    let host = strip_port(raw);
    let host = host.strip_suffix('.').unwrap_or(host);
    if host.bytes().any(|b| b.is_ascii_uppercase()) {
        Cow::Owned(host.to_ascii_lowercase())
    } else {
        Cow::Borrowed(host)
    }
}

/// `example.com:8080` → `example.com`; `[::1]:8080` → `[::1]`.
fn strip_port(raw: &str) -> &str {
    if raw.starts_with('[') {
        return raw.find(']').map_or(raw, |end| &raw[..=end]);
    }
    match raw.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.bytes().all(|b| b.is_ascii_digit()) => {
            host
        }
        _ => raw,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_is_lower_cased_and_loses_port_and_trailing_dot() {
        assert_eq!(normalize_host("Foo.Example.COM:8080"), "foo.example.com");
        assert_eq!(normalize_host("foo.example.com."), "foo.example.com");
        assert_eq!(normalize_host("foo.example.com.:80"), "foo.example.com");
    }

    #[test]
    fn suffixes_are_walked_longest_first() {
        assert_eq!(suffixes("a.b.c").collect::<Vec<_>>(), ["b.c", "c"]);
        assert_eq!(suffixes("localhost").count(), 0);
    }

    #[test]
    fn lower_case_host_is_borrowed_not_copied() {
        assert!(matches!(
            normalize_host("foo.com:80"),
            Cow::Borrowed("foo.com")
        ));
    }

    #[test]
    fn ipv6_host_keeps_its_brackets_and_loses_its_port() {
        assert_eq!(normalize_host("[::1]:8080"), "[::1]");
        assert_eq!(normalize_host("[::1]"), "[::1]");
        assert_eq!(normalize_host("[FE80::1]"), "[fe80::1]");
    }
}
