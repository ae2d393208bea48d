//! Which agents may run a class's load balancers: the IngressClass annotation
//! `portico.dev/agent-selector` (`key=value[,key=value…]`), matched against the labels agents
//! publish (`portico agent --label`). Placement honours it; a bad value is an error on the
//! IngressClass and the load balancers may go on any agent.

use crate::Objects;
use crate::class::class_of;
use portico_model::{Diagnostic, LoadBalancerId, Model, ObjectRef};
use std::collections::BTreeMap;

/// IngressClass annotation: the labels an agent needs to run the class's load balancers.
pub const AGENT_SELECTOR_ANNOTATION: &str = "portico.dev/agent-selector";

/// A label selector: every key must carry its value.
pub type Selector = BTreeMap<String, String>;

/// The selector of every load balancer whose class has one, and the problems.
pub fn agent_selectors(
    model: &Model,
    objects: &Objects,
) -> (BTreeMap<LoadBalancerId, Selector>, Vec<Diagnostic>) {
    let mut selectors = BTreeMap::new();
    let mut diagnostics = Vec::new();
    for lb in &model.load_balancers {
        let Some(class) = class_of(lb, objects) else {
            continue;
        };
        let annotations = objects
            .ingress_classes
            .get(class)
            .and_then(|c| c.metadata.annotations.as_ref());
        let Some(value) = annotations.and_then(|a| a.get(AGENT_SELECTOR_ANNOTATION)) else {
            continue;
        };
        match parse(value) {
            Ok(selector) => {
                selectors.insert(lb.id, selector);
            }
            Err(message) => {
                let object = ObjectRef::new("IngressClass", "", class);
                let field = format!("metadata.annotations[{AGENT_SELECTOR_ANNOTATION}]");
                diagnostics.push(Diagnostic::error(object, field, message));
            }
        }
    }
    diagnostics.dedup();
    (selectors, diagnostics)
}

fn parse(value: &str) -> Result<Selector, String> {
    let pairs = value.split(',').map(str::trim).filter(|p| !p.is_empty());
    pairs
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
            _ => Err(format!(
                "{value:?} is not a selector such as disk=ssd,zone=a (key=value, comma-separated); \
                 the load balancers may go on any agent"
            )),
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_comma_separated_key_value_pairs() {
        let got = parse("disk=ssd, zone = a ,").unwrap();
        let want: Selector = [("disk", "ssd"), ("zone", "a")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        assert_eq!(got, want);
        assert!(parse("").unwrap().is_empty());
        assert!(parse("disk").is_err());
        assert!(parse("=ssd").is_err());
    }
}
