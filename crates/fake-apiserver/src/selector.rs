//! Pure label and field selectors, parsed from the `labelSelector` and `fieldSelector` query
//! parameters and matched against stored objects.
//!
//! Labels: `k=v`, `k==v`, `k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`; a comma is AND.
//! Fields: `path=v`, `path==v`, `path!=v` on any dotted path into the object (`metadata.name`,
//! `metadata.namespace`, `type`, `involvedObject.name`, ...); a missing field compares as `""`.
//! Differs from the real server, which accepts only a few field paths per type and rejects others.

use serde_json::Value;

/// A malformed selector, reported as 400 BadRequest.
#[derive(Debug, thiserror::Error)]
#[error("unable to parse requirement: {0:?}")]
pub struct SelectorError(String);

#[derive(Debug, Clone, PartialEq)]
enum LabelOp {
    Eq(String),
    NotEq(String),
    Exists,
    NotExists,
    In(Vec<String>),
    NotIn(Vec<String>),
}

/// Every requirement must hold; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<(String, LabelOp)>);

/// Every requirement must hold; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        terms(text)
            .map(label_term)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn matches(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|(key, op)| {
            let value = labels.get(key).and_then(Value::as_str);
            match (op, value) {
                (LabelOp::Eq(want), Some(v)) => v == want,
                (LabelOp::Eq(_), None) => false,
                (LabelOp::NotEq(want), v) => v != Some(want.as_str()),
                (LabelOp::Exists, v) => v.is_some(),
                (LabelOp::NotExists, v) => v.is_none(),
                (LabelOp::In(set), v) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                (LabelOp::NotIn(set), v) => !v.is_some_and(|v| set.iter().any(|s| s == v)),
            }
        })
    }
}

impl FieldSelector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        terms(text)
            .map(field_term)
            .collect::<Result<_, _>>()
            .map(Self)
    }

    pub fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, want)| {
            let value = path.split('.').try_fold(object, |v, key| v.get(key));
            let value = match value {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (value == *want) == *equal
        })
    }
}

/// Comma-separated terms, except commas inside `( )`.
fn terms(text: &str) -> impl Iterator<Item = &str> {
    let mut depth = 0usize;
    let mut start = 0;
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out.into_iter().map(str::trim).filter(|t| !t.is_empty())
}

fn label_term(term: &str) -> Result<(String, LabelOp), SelectorError> {
    let bad = || SelectorError(term.to_string());
    if let Some(key) = term.strip_prefix('!') {
        return Ok((valid_key(key.trim()).ok_or_else(bad)?, LabelOp::NotExists));
    }
    if let Some((head, set)) = term.split_once('(') {
        let set = set.strip_suffix(')').ok_or_else(bad)?;
        let values = set.split(',').map(|v| v.trim().to_string()).collect();
        let mut words = head.split_whitespace();
        let (key, op) = (words.next().ok_or_else(bad)?, words.next());
        let op = match op {
            Some("in") => LabelOp::In(values),
            Some("notin") => LabelOp::NotIn(values),
            _ => return Err(bad()),
        };
        return Ok((valid_key(key).ok_or_else(bad)?, op));
    }
    if let Some((key, value, equal)) = split_comparison(term) {
        let op = if equal {
            LabelOp::Eq(value)
        } else {
            LabelOp::NotEq(value)
        };
        return Ok((valid_key(&key).ok_or_else(bad)?, op));
    }
    Ok((valid_key(term).ok_or_else(bad)?, LabelOp::Exists))
}

fn field_term(term: &str) -> Result<(String, bool, String), SelectorError> {
    let (key, value, equal) = split_comparison(term).ok_or_else(|| SelectorError(term.into()))?;
    let key = valid_key(&key).ok_or_else(|| SelectorError(term.into()))?;
    Ok((key, equal, value))
}

/// `k!=v` → (k, v, false); `k==v` or `k=v` → (k, v, true).
fn split_comparison(term: &str) -> Option<(String, String, bool)> {
    let (key, value, equal) = if let Some((k, v)) = term.split_once("!=") {
        (k, v, false)
    } else if let Some((k, v)) = term.split_once("==") {
        (k, v, true)
    } else {
        let (k, v) = term.split_once('=')?;
        (k, v, true)
    };
    Some((key.trim().to_string(), value.trim().to_string(), equal))
}

fn valid_key(key: &str) -> Option<String> {
    let ok = !key.is_empty() && !key.contains(|c: char| c.is_whitespace() || "=!(),".contains(c));
    ok.then(|| key.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj() -> Value {
        json!({"metadata": {"name": "a", "namespace": "web", "labels": {"app": "site", "tier": "fe"}},
               "type": "kubernetes.io/tls"})
    }

    fn labels(text: &str) -> bool {
        LabelSelector::parse(text).expect("parses").matches(&obj())
    }

    fn fields(text: &str) -> bool {
        FieldSelector::parse(text).expect("parses").matches(&obj())
    }

    #[test]
    fn label_requirements_are_anded() {
        assert!(labels(""));
        assert!(labels("app=site,tier==fe"));
        assert!(!labels("app=site,tier=be"));
        assert!(labels("app!=other,missing!=x"));
        assert!(labels("app,!missing"));
        assert!(!labels("missing"));
        assert!(labels("tier in (be, fe),app notin (x)"));
        assert!(!labels("tier notin (fe)"));
    }

    #[test]
    fn field_requirements_compare_dotted_paths() {
        assert!(fields("metadata.name=a,metadata.namespace!=other"));
        assert!(!fields("metadata.namespace==other"));
        assert!(fields("type=kubernetes.io/tls"));
        assert!(fields("spec.missing="));
    }

    #[test]
    fn malformed_selectors_are_errors() {
        assert!(LabelSelector::parse("a in b").is_err());
        assert!(LabelSelector::parse("=x").is_err());
        assert!(LabelSelector::parse("a b").is_err());
        assert!(FieldSelector::parse("metadata.name").is_err());
    }
}
