//! What a change rebuilt: for a load balancer whose listeners are new, the sources whose
//! policies and SNI entries may differ from those of the listeners it replaced. A consumer that
//! still holds those listeners (the store's encoder, the agent's decoder, a provider) looks at
//! these sources only; one that does not holds something else and looks at everything.

use crate::{Listener, LoadBalancerId, ObjectRef};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Weak};

/// Per load balancer, what its new listeners changed; a load balancer not named here may have
/// changed anywhere.
#[derive(Debug, Clone, Default)]
pub struct Rebuilt {
    pub load_balancers: HashMap<LoadBalancerId, RebuiltListeners>,
}

/// `to` differs from `from` only in the policies and SNI entries of `sources`, and in what the
/// listeners hold besides them (ids, ports, default pools and certificates, passthrough):
/// every other source's policies and SNI entries are equal in both, positions aside. Both are
/// weak: the hint does not keep listeners alive, and holds only while both are the ones a
/// consumer compares (see [`RebuiltListeners::between`]).
#[derive(Debug, Clone)]
pub struct RebuiltListeners {
    pub from: Weak<Vec<Listener>>,
    pub to: Weak<Vec<Listener>>,
    pub sources: HashSet<ObjectRef>,
}

impl RebuiltListeners {
    pub fn new(from: &Arc<Vec<Listener>>, to: &Arc<Vec<Listener>>) -> Self {
        RebuiltListeners {
            from: Arc::downgrade(from),
            to: Arc::downgrade(to),
            sources: HashSet::new(),
        }
    }

    /// Whether this describes the change from `from` to `to` (the very same allocations).
    pub fn between(&self, from: &Arc<Vec<Listener>>, to: &Arc<Vec<Listener>>) -> bool {
        std::ptr::eq(self.from.as_ptr(), Arc::as_ptr(from))
            && std::ptr::eq(self.to.as_ptr(), Arc::as_ptr(to))
    }
}

impl Rebuilt {
    /// The sources that may differ between `from` and `to`, the listeners of load balancer
    /// `id`, when this says so; `None`: anything may differ.
    pub fn sources(
        &self,
        id: &LoadBalancerId,
        from: &Arc<Vec<Listener>>,
        to: &Arc<Vec<Listener>>,
    ) -> Option<&HashSet<ObjectRef>> {
        let rebuilt = self.load_balancers.get(id)?;
        rebuilt.between(from, to).then_some(&rebuilt.sources)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hint_holds_only_between_the_listeners_it_names() {
        let (a, b, c) = (Arc::new(vec![]), Arc::new(vec![]), Arc::new(vec![]));
        let id = LoadBalancerId::derive("lb");
        let mut hint = RebuiltListeners::new(&a, &b);
        hint.sources
            .insert(ObjectRef::new("Ingress", "default", "web"));
        let rebuilt = Rebuilt {
            load_balancers: HashMap::from([(id, hint)]),
        };
        assert_eq!(rebuilt.sources(&id, &a, &b).map(HashSet::len), Some(1));
        assert!(rebuilt.sources(&id, &c, &b).is_none(), "from another state");
        assert!(rebuilt.sources(&id, &a, &c).is_none(), "to another state");
        let other = LoadBalancerId::derive("other");
        assert!(rebuilt.sources(&other, &a, &b).is_none());
    }
}
