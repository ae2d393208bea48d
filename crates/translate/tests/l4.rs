//! Services of type LoadBalancer → `l4` load balancers: which Services are served, and their
//! listeners and pools (the golden case `l4-services` shows a whole one).

mod support;

use portico_model::Protocol;
use portico_translate::{Config, translate};

const SERVICES: &str = include_str!("golden/l4-services/input.yaml");

#[test]
fn only_the_l4_class_is_served_unless_all_services_are() {
    let objects = support::load(SERVICES);
    let names = |config: &Config| -> Vec<String> {
        let t = translate(&objects, config);
        t.model
            .load_balancers
            .iter()
            .map(|lb| lb.name.clone())
            .collect()
    };
    assert_eq!(names(&Config::default()), ["service/apps/dns"]);
    let all = Config {
        l4_all_services: true,
        ..Config::default()
    };
    let mut served = names(&all);
    served.sort();
    assert_eq!(served, ["service/apps/dns", "service/apps/plain"]);

    let t = translate(&objects, &all);
    let plain = (t.model.load_balancers.iter())
        .find(|lb| lb.name == "service/apps/plain")
        .expect("plain is served");
    assert_eq!(plain.provider, "l4");
    assert_eq!(plain.listeners.len(), 1);
    let listener = &plain.listeners[0];
    assert_eq!((listener.protocol, listener.port), (Protocol::Tcp, 80));
    assert_eq!(listener.default_pool, Some(plain.pools[0].id));
    assert_eq!(plain.pools[0].service_port, "80");
    assert!(plain.pools[0].settings.is_default());
}
