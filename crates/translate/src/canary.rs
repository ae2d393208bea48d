//! A main route and its canary (`canary: "true"` on another Ingress for the same host and
//! path) as policies, in ingress-nginx's order of precedence: the header (its value, its
//! pattern, or `always` / `never`), then the cookie (`always` / `never`), then the weight.
//! Each header or cookie decision is a policy with one condition, ranked by `precedence`
//! before the main policy (which has none); the weight is the main policy's split. A request
//! that no condition decides falls through to the next, as in ingress-nginx's balancer.

use crate::annotations::{Canary, HeaderMatch};
use crate::route::{Canaried, PolicyIds, Route};
use portico_model::{
    CompareType, L7Policy, L7PolicyId, L7Rule, L7RuleId, PolicyAction, PoolId, RuleType,
    WeightedPool,
};

/// One decision: the condition, and whether it sends the request to the canary.
type Decision = (RuleType, CompareType, String, String, bool);

/// The decisions of `canary` in precedence order.
fn decisions(canary: &Canary) -> Vec<Decision> {
    let mut out = Vec::new();
    if let Some(name) = &canary.header {
        let header = |compare, value: &str, to_canary| {
            (
                RuleType::Header,
                compare,
                name.clone(),
                value.to_owned(),
                to_canary,
            )
        };
        match &canary.header_match {
            HeaderMatch::Value(v) => out.push(header(CompareType::EqualTo, v, true)),
            HeaderMatch::Pattern(p) => out.push(header(CompareType::Regex, &searched(p), true)),
            HeaderMatch::AlwaysNever => {
                out.push(header(CompareType::EqualTo, "always", true));
                out.push(header(CompareType::EqualTo, "never", false));
            }
        }
    }
    if let Some(name) = &canary.cookie {
        for (value, to_canary) in [("always", true), ("never", false)] {
            let cookie = (
                RuleType::Cookie,
                CompareType::EqualTo,
                name.clone(),
                value.to_owned(),
            );
            out.push((cookie.0, cookie.1, cookie.2, cookie.3, to_canary));
        }
    }
    out
}

/// ingress-nginx's `canary-by-header-pattern` (a search in the value, case-sensitive) as the
/// model's [`CompareType::Regex`] (matched from the value's start, case-insensitively).
fn searched(pattern: &str) -> String {
    format!("(?s-i:.*?(?:{pattern}))")
}

/// The settings of the canary a route carries (its Ingress is a canary, so they are set).
fn settings<'a>(canary: &Canaried<'a>) -> Option<&'a Canary> {
    canary.source.location.canary.as_ref()
}

/// The header and cookie policies of `route`'s canary, each a copy of `main` (the route's
/// own policy, forwarding to its pool) with one more condition.
pub(crate) fn guarded(
    route: &Route<'_>,
    ids: &PolicyIds,
    main: &L7Policy,
    out: &mut Vec<L7Policy>,
) {
    let Some(canary) = route.canary else { return };
    let Some(settings) = settings(&canary) else {
        return;
    };
    let main_pool = route.spec.backend.pool;
    for (n, (rule_type, compare_type, key, value, to_canary)) in
        decisions(settings).into_iter().enumerate()
    {
        let id = L7PolicyId::derive(&format!("{}/canary/{n}", ids.policy));
        let pool = if to_canary {
            canary.spec.backend.pool
        } else {
            main_pool
        };
        let mut rules: Vec<L7Rule> = (main.rules.iter())
            .map(|rule| L7Rule {
                id: L7RuleId::derive(&format!("{id}/rule/{}", rule.id)),
                ..rule.clone()
            })
            .collect();
        rules.push(L7Rule {
            id: L7RuleId::derive(&format!("{id}/condition")),
            rule_type,
            compare_type,
            key: Some(key),
            value,
        });
        out.push(L7Policy {
            id,
            action: PolicyAction::RedirectToPool { pool },
            rules,
            source: main.source.clone(),
            options: main.options.clone(),
            precedence: u32::try_from(n).unwrap_or(u32::MAX),
        });
    }
}

/// The main policy's action: its pool, or a split with the canary's by weight.
pub(crate) fn action(route: &Route<'_>, pool: PoolId) -> PolicyAction {
    let canary = route
        .canary
        .and_then(|c| Some((c.spec.backend.pool, settings(&c)?)));
    match canary {
        Some((alternative, c)) if c.weight > 0 => {
            let weight = c.weight.min(c.total);
            PolicyAction::RedirectToPools {
                pools: vec![
                    WeightedPool {
                        pool: Some(pool),
                        weight: c.total - weight,
                        options: None,
                    },
                    WeightedPool {
                        pool: Some(alternative),
                        weight,
                        options: None,
                    },
                ],
            }
        }
        _ => PolicyAction::RedirectToPool { pool },
    }
}
