//! The compiled table must answer exactly like evaluating the policies in order.
#![allow(clippy::unwrap_used)] // tests may unwrap

mod support;

use portico_dataplane_http::{Target, compile};
use portico_model::{CompareType, L7Policy, L7Rule, Model, PolicyAction, RuleType};
use proptest::prelude::*;
use support::model::{ModelBuilder, addr, exact, header, host, method, prefix, query};

const RULE_HOSTS: &[&str] = &[
    "a.com",
    "b.a.com",
    "c.b.a.com",
    "B.A.com",
    "*.a.com",
    "*.b.a.com",
    "*.com",
    "**.a.com",
    "**.b.a.com",
    "**.com",
];
const REQUEST_HOSTS: &[&str] = &[
    "a.com",
    "b.a.com",
    "c.b.a.com",
    "x.c.b.a.com",
    "A.Com:8080",
    "b.a.com.",
    "B.a.COM:1",
    "[::1]:80",
    ".a.com",
    "com",
    "other.org",
];
const SEGMENTS: &[&str] = &["a", "b", "ab", ""];

fn path(max_depth: usize) -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(SEGMENTS), 0..=max_depth),
        any::<bool>(),
    )
        .prop_map(|(segments, trailing)| {
            let mut p: String = segments.iter().map(|s| format!("/{s}")).collect();
            if trailing || p.is_empty() {
                p.push('/');
            }
            p
        })
}

fn path_rule() -> impl Strategy<Value = L7Rule> {
    (path(3), any::<bool>()).prop_map(|(p, is_exact)| if is_exact { exact(&p) } else { prefix(&p) })
}

/// Header fields of rules and of requests: (name, value).
const FIELDS: &[(&str, &str)] = &[("x-a", "1"), ("x-a", "2"), ("x-b", "1")];

/// Query parameters of rules and of requests: (name, value).
const PARAMS: &[(&str, &str)] = &[("q", "1"), ("q", "2"), ("r", "1")];
const METHODS: &[&str] = &["GET", "POST"];

fn rules() -> impl Strategy<Value = Vec<L7Rule>> {
    let hosts = prop::collection::vec(prop::sample::select(RULE_HOSTS).prop_map(host), 0..=2);
    let paths = prop::collection::vec(path_rule(), 0..=2);
    let fields = prop::sample::select(FIELDS).prop_map(|(n, v)| header(n, v));
    let headers = prop::collection::vec(fields, 0..=2);
    let params = prop::sample::select(PARAMS).prop_map(|(n, v)| query(n, v));
    let queries = prop::collection::vec(params, 0..=1);
    let methods = prop::option::of(prop::sample::select(METHODS).prop_map(method));
    (hosts, paths, headers, queries, methods).prop_map(|(mut h, p, f, q, m)| {
        h.extend(p);
        h.extend(f);
        h.extend(q);
        h.extend(m);
        h
    })
}

/// A policy as (rules, action): `Some(i)` forwards to pool `p{i}` (`Some(3)` redirects to
/// HTTPS), `None` rejects with 403.
fn policies() -> impl Strategy<Value = Vec<(Vec<L7Rule>, Option<usize>)>> {
    prop::collection::vec((rules(), prop::option::weighted(0.9, 0..4usize)), 0..8)
}

fn build(policies: &[(Vec<L7Rule>, Option<usize>)], default: Option<usize>) -> Model {
    let mut m = ModelBuilder::new("prop");
    let pools: Vec<_> = (0..3)
        .map(|i| m.pool(&format!("p{i}"), &[addr(i as u8)]))
        .collect();
    for (rules, action) in policies {
        let action = match action {
            Some(3) => PolicyAction::RedirectToHttps { status: 308 },
            Some(i) => PolicyAction::RedirectToPool { pool: pools[*i] },
            None => PolicyAction::Reject { status: 403 },
        };
        m.action(rules.clone(), action);
    }
    if let Some(d) = default {
        m.default_pool(pools[d]);
    }
    m.build()
}

fn naive_host(raw: &str) -> String {
    let h = match raw.find(']') {
        Some(end) if raw.starts_with('[') => &raw[..=end],
        _ => raw.split(':').next().unwrap_or(raw),
    };
    h.strip_suffix('.').unwrap_or(h).to_lowercase()
}

/// What a request offers the conditions: header fields, method, query.
struct Asked<'a> {
    fields: &'a [(&'a str, &'a str)],
    method: &'a str,
    query: Option<&'a str>,
}

fn naive_rule(rule: &L7Rule, host: &str, path: &str, asked: &Asked<'_>) -> bool {
    let value = rule.value.as_str();
    let fields = asked.fields;
    match (rule.rule_type, rule.compare_type) {
        (RuleType::Method, CompareType::EqualTo) => asked.method == value,
        (RuleType::Query, CompareType::EqualTo) => {
            let name = rule.key.as_deref().unwrap_or_default();
            let pairs = asked.query.into_iter().flat_map(|q| q.split('&'));
            let first = pairs
                .filter_map(|p| p.split_once('='))
                .find(|(n, _)| *n == name);
            first.is_some_and(|(_, v)| v == value)
        }
        (RuleType::HostName, CompareType::WildcardSuffix) => host
            .strip_suffix(&format!(".{}", value.to_lowercase()))
            .is_some_and(|labels| !labels.is_empty() && !labels.starts_with('.')),
        (RuleType::Header, CompareType::EqualTo) => {
            let name = rule.key.as_deref().unwrap_or_default();
            fields
                .iter()
                .any(|(n, v)| n.eq_ignore_ascii_case(name) && *v == value)
        }
        (RuleType::HostName, CompareType::EqualTo) => host == value.to_lowercase(),
        (RuleType::HostName, CompareType::WildcardLabel) => host
            .strip_suffix(&format!(".{}", value.to_lowercase()))
            .is_some_and(|label| !label.is_empty() && !label.contains('.')),
        (RuleType::Path, CompareType::EqualTo) => path == value,
        (RuleType::Path, CompareType::PathPrefix) => {
            let v = value.trim_end_matches('/');
            v.is_empty() || path == v || path.starts_with(&format!("{v}/"))
        }
        _ => false,
    }
}

/// The reference: first policy whose rules all match, then the default pool.
fn naive(model: &Model, raw_host: &str, path: &str, asked: &Asked<'_>) -> String {
    let lb = &model.load_balancers[0];
    let listener = &lb.listeners[0];
    let host = naive_host(raw_host);
    let first = listener
        .policies
        .iter()
        .find(|p: &&std::sync::Arc<L7Policy>| {
            p.rules.iter().all(|r| naive_rule(r, &host, path, asked))
        });
    let pool_name = |id| lb.pool(id).map(|p| p.name.clone()).unwrap_or_default();
    match first.map(|p| &p.action) {
        Some(PolicyAction::RedirectToPool { pool }) => pool_name(*pool),
        Some(PolicyAction::Reject { status }) => format!("reject {status}"),
        Some(PolicyAction::RedirectToHttps { status }) => format!("redirect {status}"),
        Some(PolicyAction::RedirectToPools { .. } | PolicyAction::RequestRedirect(_)) => {
            "not generated".into()
        }
        Some(PolicyAction::RedirectToUrl { status, url }) => format!("redirect {status} {url}"),
        None => listener
            .default_pool
            .map(pool_name)
            .unwrap_or_else(|| "404".into()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn compiled_table_answers_like_ordered_evaluation(
        policies in policies(),
        default in prop::option::of(0..3usize),
        requests in prop::collection::vec(
            (
                prop::sample::select(REQUEST_HOSTS),
                path(4),
                prop::sample::subsequence(FIELDS, 0..=FIELDS.len()),
                prop::sample::select(METHODS),
                prop::sample::subsequence(PARAMS, 0..=PARAMS.len()),
            ),
            1..16,
        ),
    ) {
        let model = build(&policies, default);
        let table = compile(&model);
        for (host, path, fields, method, params) in &requests {
            let mut headers = http::HeaderMap::new();
            for (name, value) in fields {
                headers.append(*name, value.parse().unwrap());
            }
            let query: Vec<String> = params.iter().map(|(n, v)| format!("{n}={v}")).collect();
            let query = query.join("&");
            let query = (!query.is_empty()).then_some(query.as_str());
            let request = portico_dataplane_http::RouteRequest {
                method,
                query,
                headers: &headers,
            };
            let asked = Asked { fields, method, query };
            let got = match table.route_request(false, host, path, &request) {
                Some(Target::Pool(pool) | Target::Options(pool, _)) => pool.name().to_owned(),
                Some(Target::Reject(status)) => format!("reject {status}"),
                Some(Target::RedirectToHttps(status)) => format!("redirect {status}"),
                Some(Target::RedirectToUrl(status, url)) => format!("redirect {status} {url}"),
                Some(Target::Redirect(redirect)) => format!("redirect {}", redirect.status),
                None => "404".to_owned(),
            };
            prop_assert_eq!(got, naive(&model, host, path, &asked), "{} {}{} {:?} {:?}", method, host, path, fields, query);
        }
    }
}
