//! Label selectors on Namespaces (`allowedRoutes.namespaces.selector`): which namespaces'
//! routes a listener admits.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use std::collections::BTreeMap;

/// Whether `selector` is one Portico can evaluate; else what is wrong, naming the field under
/// `selector`.
pub(crate) fn check(selector: &LabelSelector) -> Result<(), String> {
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let field = format!("matchExpressions[{i}]");
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!("{field}.values: {} needs values", e.operator));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!("{field}.values: {} takes none", e.operator));
            }
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => return Err(format!("{field}.operator: unknown operator {other:?}")),
        }
    }
    Ok(())
}

/// Whether `labels` (a Namespace's; none when the Namespace is not known) satisfy `selector`
/// as Kubernetes defines it: every `matchLabels` entry and every `matchExpressions` term (an
/// empty selector selects every namespace). A selector [`check`] refuses selects none.
pub(crate) fn selects(selector: &LabelSelector, labels: Option<&BTreeMap<String, String>>) -> bool {
    if check(selector).is_err() {
        return false;
    }
    let value = |key: &str| labels.and_then(|l| l.get(key));
    let pairs = selector.match_labels.iter().flatten();
    let labelled = pairs.into_iter().all(|(k, v)| value(k) == Some(v));
    labelled
        && (selector.match_expressions.iter().flatten()).all(|e| {
            let values = e.values.as_deref().unwrap_or_default();
            let among = value(&e.key).is_some_and(|v| values.contains(v));
            match e.operator.as_str() {
                "In" => among,
                "NotIn" => !among,
                "Exists" => value(&e.key).is_some(),
                _ => value(&e.key).is_none(),
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        (pairs.iter())
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| (*v).to_owned()).collect()),
        }
    }

    #[test]
    fn match_labels_need_every_pair() {
        let selector = LabelSelector {
            match_labels: Some(labels(&[("team", "a"), ("env", "prod")])),
            ..LabelSelector::default()
        };
        let both = labels(&[("team", "a"), ("env", "prod"), ("x", "y")]);
        assert!(selects(&selector, Some(&both)));
        assert!(!selects(&selector, Some(&labels(&[("team", "a")]))));
        assert!(!selects(
            &selector,
            Some(&labels(&[("team", "b"), ("env", "prod")]))
        ));
        assert!(!selects(&selector, None));
    }

    #[test]
    fn empty_selector_selects_every_namespace() {
        assert!(selects(&LabelSelector::default(), None));
        assert!(selects(
            &LabelSelector::default(),
            Some(&labels(&[("a", "b")]))
        ));
    }

    #[test]
    fn expressions_follow_their_operators() {
        let of = |e| LabelSelector {
            match_expressions: Some(vec![e]),
            ..LabelSelector::default()
        };
        let prod = labels(&[("env", "prod")]);
        let dev = labels(&[("env", "dev")]);
        let none = labels(&[]);
        let cases = [
            (
                expression("env", "In", &["prod", "stage"]),
                [true, false, false],
            ),
            (expression("env", "NotIn", &["prod"]), [false, true, true]),
            (expression("env", "Exists", &[]), [true, true, false]),
            (expression("env", "DoesNotExist", &[]), [false, false, true]),
        ];
        for (e, expected) in cases {
            let selector = of(e);
            let got = [&prod, &dev, &none].map(|l| selects(&selector, Some(l)));
            assert_eq!(got, expected, "{selector:?}");
        }
    }

    #[test]
    fn invalid_selectors_are_refused_and_select_none() {
        let of = |e| LabelSelector {
            match_expressions: Some(vec![e]),
            ..LabelSelector::default()
        };
        let cases = [
            (
                expression("env", "Equals", &["x"]),
                "matchExpressions[0].operator",
            ),
            (expression("env", "In", &[]), "matchExpressions[0].values"),
            (
                expression("env", "Exists", &["x"]),
                "matchExpressions[0].values",
            ),
        ];
        for (e, field) in cases {
            let selector = of(e);
            let error = check(&selector).expect_err("refused");
            assert!(error.starts_with(field), "{error}");
            assert!(!selects(&selector, Some(&labels(&[("env", "x")]))));
        }
    }
}
