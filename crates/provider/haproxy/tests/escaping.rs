//! Property: arbitrary strings in every Ingress field that reaches the renderer (rule hosts,
//! wildcard hosts, Exact and Prefix paths, TLS hosts) never produce an extra directive. The
//! configuration is read back with haproxy's own quoting rules (section 2.2 of its manual):
//! it has exactly the lines and words of the same model with harmless values, and each value
//! comes back as one word equal to the original. The route map files hold one key and one
//! backend per line, and each host and path comes back whole in its key or its policy is not
//! served (an error). `haproxy -c` accepts a sample of them. A header match's value (exact or
//! a regular expression) comes back as one word.

#![allow(clippy::unwrap_used)]

mod support;

use portico_model::*;
use proptest::prelude::*;
use std::path::Path;

/// A line cut into words the way haproxy's parser cuts it; `None` for an unterminated quote
/// or an environment variable in weak quotes (which haproxy would expand).
fn words(line: &str) -> Option<Vec<Vec<u8>>> {
    let bytes = line.as_bytes();
    let (mut words, mut word, mut in_word, mut i) = (Vec::new(), Vec::new(), false, 0);
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match (quote, b) {
            (Some(b'\''), b'\'') | (Some(b'"'), b'"') => quote = None,
            (Some(b'\''), _) => word.push(b),
            (Some(b'"'), b'$') => return None,
            (None, b' ' | b'\t') => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, b'#') => break,
            (_, b'\\') => {
                i += 1;
                let (byte, used) = escape(&bytes[i..])?;
                word.push(byte);
                i += used - 1;
                in_word = true;
            }
            (None, b'\'' | b'"') => {
                quote = Some(b);
                in_word = true;
            }
            _ => {
                word.push(b);
                in_word = true;
            }
        }
        i += 1;
    }
    if quote.is_some() {
        return None;
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// The byte an escape stands for and how many bytes after the backslash it used.
fn escape(rest: &[u8]) -> Option<(u8, usize)> {
    match rest.first()? {
        b'x' => {
            let hex = std::str::from_utf8(rest.get(1..3)?).ok()?;
            Some((u8::from_str_radix(hex, 16).ok()?, 3))
        }
        b'n' => Some((b'\n', 1)),
        b'r' => Some((b'\r', 1)),
        b't' => Some((b'\t', 1)),
        other => Some((*other, 1)),
    }
}

fn rule(kind: RuleType, compare: CompareType, value: &str, n: usize) -> L7Rule {
    L7Rule {
        id: L7RuleId::derive(&format!("{n}/{value}")),
        rule_type: kind,
        compare_type: compare,
        key: None,
        value: value.to_owned(),
    }
}

/// One policy per (host, path) pair; the hosts alternate between exact and wildcard, the
/// paths between Exact and Prefix. TLS hosts name one Secret each.
fn model(fields: &[(String, String)], sni: &[String]) -> LoadBalancer {
    let pool = PoolId::derive("pool");
    let policies = fields.iter().enumerate().map(|(n, (host, path))| {
        let host_compare = if n % 2 == 0 {
            CompareType::EqualTo
        } else {
            CompareType::WildcardLabel
        };
        let path_compare = if n % 3 == 0 {
            CompareType::EqualTo
        } else {
            CompareType::PathPrefix
        };
        L7Policy {
            id: L7PolicyId::derive(&n.to_string()),
            action: PolicyAction::RedirectToPool { pool },
            rules: vec![
                rule(RuleType::HostName, host_compare, host, n),
                rule(RuleType::Path, path_compare, path, n),
            ],
            source: std::sync::Arc::new(ObjectRef::new("Ingress", "default", "web")),
            precedence: 0,
            options: None,
        }
    });
    let policies: Vec<std::sync::Arc<L7Policy>> = policies.map(std::sync::Arc::new).collect();
    let tls = ListenerTls {
        default_certificate: None,
        sni: sni
            .iter()
            .enumerate()
            .map(|(n, host)| SniCertificate {
                host: host.clone(),
                certificate: ObjectRef::new("Secret", "default", &format!("s{n}")),
                source: ObjectRef::new("Ingress", "default", "web"),
            })
            .collect(),
        passthrough: Vec::new(),
        refused: Vec::new(),
        http3_off: false,
    };
    let listener = |protocol, tls| Listener {
        id: ListenerId::derive(&format!("{protocol:?}")),
        name: format!("{protocol:?}"),
        protocol,
        port: 80,
        policies: policies.clone(),
        default_pool: Some(pool),
        default_source: None,
        tls,
    };
    LoadBalancer {
        id: LoadBalancerId::derive("lb"),
        name: "lb".into(),
        origin: portico_model::ObjectRef::new("IngressClass", "", "portico"),
        provider: "haproxy".into(),
        vip: None,
        floating_ip: None,
        listeners: std::sync::Arc::new(vec![
            listener(Protocol::Http, None),
            listener(Protocol::TerminatedHttps, Some(tls)),
        ]),
        pools: vec![std::sync::Arc::new(Pool {
            id: pool,
            name: "p".into(),
            service: ObjectRef::new("Service", "default", "web"),
            service_port: "80".into(),
            algorithm: Algorithm::RoundRobin,
            settings: Default::default(),
            protocol: PoolProtocol::Http,
            members: vec![],
        })],
    }
}

/// A harmless value that renders the same lines: a NUL stays (the policy is left out either
/// way) and a prefix that normalizes to `/` stays `/` (no path ACL either way).
fn harmless(value: &str, fallback: &str, is_prefix: bool) -> String {
    if value.contains('\0') {
        "a\0".to_owned()
    } else if is_prefix && value.trim_end_matches('/').is_empty() {
        "/".to_owned()
    } else {
        fallback.to_owned()
    }
}

fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        any::<String>(),
        "[ \t\r\n#'\"\\\\$%{}()\\[\\]a-z/.*:-]{0,24}",
        Just("/a\nbind :80".to_owned()),
        Just("x\" if TRUE\nuse_backend evil".to_owned()),
        Just("*.a.b # comment".to_owned()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn no_field_value_can_add_a_directive(
        fields in proptest::collection::vec((field(), field()), 1..6),
        sni in proptest::collection::vec(field(), 0..4),
    ) {
        let dir = Path::new("/state/lb");
        let lb = model(&fields, &sni);
        let reference_fields: Vec<(String, String)> = fields.iter().enumerate().map(|(n, (h, p))| {
            (harmless(h, &format!("h{n}.test"), false), harmless(p, &format!("/p{n}"), n % 3 != 0))
        }).collect();
        let reference_sni: Vec<String> = sni.iter().map(|_| "*.tls.test".to_owned()).collect();
        let actual = support::render_in(&lb, dir);
        let expected = support::render_in(&model(&reference_fields, &reference_sni), dir);

        let lines: Vec<&str> = actual.config.lines().collect();
        let reference: Vec<&str> = expected.config.lines().collect();
        prop_assert_eq!(lines.len(), reference.len(), "{}", actual.config);
        for (line, reference) in lines.iter().zip(&reference) {
            let got = words(line);
            prop_assert!(got.is_some(), "unreadable line {:?}", line);
            let (got, want) = (got.unwrap(), words(reference).unwrap());
            prop_assert_eq!(got.len(), want.len(), "{:?} vs {:?}", line, reference);
            prop_assert_eq!(got.first(), want.first(), "{:?}", line);
        }
        // The route maps: every line is one key and one backend of Portico's, read as map
        // files are read (words split on spaces and tabs, `#` starts a comment), and each
        // policy's host and path come back whole as the start of its key, or the policy is
        // left out with an error on its Ingress.
        let pool = PoolId::derive("pool").to_string();
        for (name, entries) in &actual.maps {
            let text = portico_provider_haproxy::routes::file_text(entries);
            prop_assert_eq!(text.lines().count(), entries.len(), "{}", name);
            for line in text.lines() {
                prop_assert!(!line.starts_with('#'), "{:?}", line);
                let words: Vec<&str> = line.split([' ', '\t']).collect();
                prop_assert_eq!(words.len(), 2, "{:?}", line);
                prop_assert_eq!(words[1], pool.as_str());
                prop_assert!(words[0].bytes().all(|b| b.is_ascii_graphic()), "{:?}", line);
            }
        }
        let all_keys: Vec<&String> = actual.maps.values().flat_map(|m| m.keys()).collect();
        for (n, (host, path)) in fields.iter().enumerate() {
            let host = host.to_ascii_lowercase();
            let host = if n % 2 == 1 { format!("*.{host}") } else { host };
            let mappable = [&host, path].iter().all(|v| v.bytes().all(|b| b.is_ascii_graphic()))
                && !host.starts_with('#')
                && !(host.is_empty() && path.starts_with('#'));
            let key = format!("{host}{}", if n % 3 == 0 { path.as_str() } else { path.trim_end_matches('/') });
            if mappable && !host.contains('/') && !path.is_empty() && path.starts_with('/') {
                prop_assert!(all_keys.iter().any(|k| k.starts_with(&key)), "{:?} not in {:?}", key, all_keys);
            }
            if !mappable && !host.contains('\0') && !path.contains('\0') {
                prop_assert!(!actual.diagnostics.is_empty(), "{:?} {:?}", host, path);
            }
        }
        // crt-list lines: a file and a host, nothing else.
        for line in actual.crt_list.lines() {
            let parts: Vec<&str> = line.split_whitespace().collect();
            prop_assert_eq!(parts.len(), 2, "{:?}", line);
            prop_assert!(parts[1].bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"*.-".contains(&b)));
        }
    }
}

#[test]
fn haproxy_accepts_nasty_values_as_plain_patterns() {
    let nasty = [
        ("a.com\nbind :80", "/a b\nuse_backend x"),
        ("x\"y", "/it's"),
        ("h#c", "/p#\\$HOME"),
        ("w", "/${HOME}%[src]"),
        ("é.com", "/\u{7f}\t"),
    ];
    let fields: Vec<(String, String)> = nasty
        .iter()
        .map(|(h, p)| (h.to_string(), p.to_string()))
        .collect();
    let lb = model(&fields, &["ok.test".to_owned(), "bad host".to_owned()]);
    support::check(&lb).unwrap();
}

/// One policy for h.test with a header match on `x-v` of `value` (a regular expression when
/// `regex`).
fn header_model(value: &str, regex: bool) -> LoadBalancer {
    let mut lb = model(&[("h.test".to_owned(), "/".to_owned())], &[]);
    let compare = if regex {
        CompareType::Regex
    } else {
        CompareType::EqualTo
    };
    let header = L7Rule {
        key: Some("x-v".to_owned()),
        ..rule(RuleType::Header, compare, value, 0)
    };
    let mut listeners = (*lb.listeners).clone();
    for listener in &mut listeners {
        for policy in &mut listener.policies {
            std::sync::Arc::make_mut(policy).rules.push(header.clone());
        }
    }
    lb.listeners = std::sync::Arc::new(listeners);
    lb
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// A header match's value comes back as the one word after `--`, whole (an expression
    /// anchored), ending the term; one haproxy cannot carry is left out with an error.
    #[test]
    fn a_header_match_value_comes_back_as_one_word(value in field(), regex in any::<bool>()) {
        let rendered = support::render_in(&header_model(&value, regex), Path::new("/state/lb"));
        let lines: Vec<&str> = rendered.config.lines().filter(|l| l.contains("req.fhdr(x-v)")).collect();
        if lines.is_empty() {
            prop_assert!(regex || value.is_empty() || value.contains('\0'), "{:?}", value);
            prop_assert!(!rendered.diagnostics.is_empty(), "{:?}", value);
        }
        let want = if regex { format!("^(?:{value})") } else { value.clone() };
        for line in lines {
            let got = words(line);
            prop_assert!(got.is_some(), "unreadable line {:?}", line);
            let got = got.unwrap();
            let at = got.iter().position(|w| w == b"--").unwrap();
            prop_assert_eq!(&got[at + 1], want.as_bytes(), "{:?}", line);
            prop_assert_eq!(&got[at + 2..], [b"}".to_vec()], "{:?}", line);
        }
    }
}
