//! Name syntaxes of the Kubernetes API (apimachinery `IsDNS1123Subdomain` and friends). Each
//! check returns the reasons a value is invalid, empty when it is valid.

const SUBDOMAIN_MAX: usize = 253;
const LABEL_MAX: usize = 63;
const PORT_NAME_MAX: usize = 15;

/// A DNS-1123 subdomain: dot-separated labels of lower-case alphanumerics and `-`, each
/// starting and ending alphanumeric, 253 characters at most.
pub(crate) fn dns1123_subdomain(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        reasons.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    if !value.split('.').all(label_chars_ok) {
        reasons.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character"
                .to_owned(),
        );
    }
    reasons
}

/// A DNS-1123 label: one label of at most 63 characters.
pub(crate) fn dns1123_label(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > LABEL_MAX {
        reasons.push(format!("must be no more than {LABEL_MAX} characters"));
    }
    if !label_chars_ok(value) {
        reasons.push(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \
             '-', and must start and end with an alphanumeric character"
                .to_owned(),
        );
    }
    reasons
}

/// A DNS-1035 label (Service names): a DNS-1123 label that starts with a letter.
pub(crate) fn dns1035_label(value: &str) -> Vec<String> {
    let mut reasons = dns1123_label(value);
    let starts_with_letter = value.starts_with(|c: char| c.is_ascii_lowercase());
    if reasons.is_empty() && !starts_with_letter {
        reasons.push("a DNS-1035 label must start with an alphabetic character".to_owned());
    }
    reasons
}

/// `*.` followed by a DNS-1123 subdomain: the `*` may only be the whole first label.
pub(crate) fn wildcard_dns1123_subdomain(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > SUBDOMAIN_MAX {
        reasons.push(format!("must be no more than {SUBDOMAIN_MAX} characters"));
    }
    let rest_ok = value
        .strip_prefix("*.")
        .is_some_and(|rest| rest.split('.').all(label_chars_ok));
    if !rest_ok {
        reasons.push(
            "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS \
             subdomain, which must consist of lower case alphanumeric characters, '-' or '.' \
             and end with an alphanumeric character"
                .to_owned(),
        );
    }
    reasons
}

/// An IANA_SVC_NAME (named ports): at most 15 lower-case alphanumerics or `-`, at least one
/// letter, no `-` at either end and no `--`.
pub(crate) fn port_name(value: &str) -> Vec<String> {
    let mut reasons = Vec::new();
    if value.len() > PORT_NAME_MAX {
        reasons.push(format!("must be no more than {PORT_NAME_MAX} characters"));
    }
    let chars_ok = value
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if !chars_ok {
        reasons
            .push("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".into());
    }
    if value.contains("--") {
        reasons.push("must not contain consecutive hyphens".to_owned());
    }
    if !value.chars().any(|c| c.is_ascii_lowercase()) {
        reasons.push("must contain at least one letter (a-z)".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        reasons.push("must not begin or end with a hyphen".to_owned());
    }
    reasons
}

/// A port number: 1 to 65535.
pub(crate) fn port_number(value: i32) -> Vec<String> {
    if (1..=65535).contains(&value) {
        Vec::new()
    } else {
        vec!["must be between 1 and 65535, inclusive".to_owned()]
    }
}

fn label_chars_ok(label: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    label.starts_with(alnum)
        && label.ends_with(alnum)
        && label.chars().all(|c| alnum(c) || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subdomain_accepts_dotted_lowercase_labels() {
        assert!(dns1123_subdomain("foo.bar-baz.com").is_empty());
        assert!(dns1123_subdomain("a").is_empty());
    }

    #[test]
    fn subdomain_rejects_case_empty_labels_and_edges() {
        for bad in [
            "", "Foo.com", "foo..com", "-foo.com", "foo-.com", "foo.com.", "a_b",
        ] {
            assert!(!dns1123_subdomain(bad).is_empty(), "{bad}");
        }
        assert!(!dns1123_subdomain(&"a".repeat(254)).is_empty());
    }

    #[test]
    fn wildcard_needs_star_as_whole_first_label() {
        assert!(wildcard_dns1123_subdomain("*.foo.com").is_empty());
        for bad in ["*", "*foo.com", "foo.*.com", "*.*.com", "**.foo.com", "*."] {
            assert!(!wildcard_dns1123_subdomain(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn dns1035_label_must_start_with_a_letter() {
        assert!(dns1035_label("web").is_empty());
        assert!(!dns1035_label("1web").is_empty());
        assert!(!dns1035_label("web.x").is_empty());
    }

    #[test]
    fn port_names_follow_iana_svc_name() {
        assert!(port_name("http").is_empty());
        assert!(port_name("h2c-8080").is_empty());
        for bad in [
            "",
            "8080",
            "-http",
            "http-",
            "ht--tp",
            "HTTP",
            "averyveryverylongname",
        ] {
            assert!(!port_name(bad).is_empty(), "{bad}");
        }
    }

    #[test]
    fn port_numbers_are_one_to_65535() {
        assert!(port_number(1).is_empty() && port_number(65535).is_empty());
        assert!(!port_number(0).is_empty() && !port_number(65536).is_empty());
    }
}
