use super::*;
use portico_model::{
    Listener, ListenerId, ListenerTls, LoadBalancer, LoadBalancerId, ObjectRef, SniCertificate,
};
use portico_tls::Material;
use portico_tls::generate::Authority;

fn material(ca: &Authority, name: &str) -> Arc<Material> {
    let issued = ca.issue(&[name]).unwrap();
    let m = Material::from_pem(issued.chain_pem.as_bytes(), issued.key_pem.as_bytes());
    Arc::new(m.unwrap())
}

fn secret(name: &str) -> ObjectRef {
    ObjectRef::new("Secret", "default", name)
}

fn model(name: &str, provider: &str, sni: &[(&str, &str)], default: Option<&str>) -> Model {
    let sni = sni.iter().map(|(host, s)| SniCertificate {
        host: (*host).to_owned(),
        certificate: secret(s),
        source: ObjectRef::new("Ingress", "default", "i"),
    });
    let listener = Listener {
        id: ListenerId::derive(name),
        name: "TERMINATED_HTTPS:443".into(),
        protocol: Protocol::TerminatedHttps,
        port: 443,
        policies: vec![],
        default_pool: None,
        default_source: None,
        tls: Some(ListenerTls {
            default_certificate: default.map(secret),
            sni: sni.collect(),
            passthrough: Vec::new(),
            refused: Vec::new(),
            http3_off: false,
        }),
    };
    Model {
        load_balancers: vec![LoadBalancer {
            id: LoadBalancerId::derive(name),
            name: name.into(),
            origin: ObjectRef::new("IngressClass", "", name),
            provider: provider.into(),
            vip: None,
            floating_ip: None,
            listeners: std::sync::Arc::new(vec![listener]),
            pools: vec![],
        }],
    }
}

struct Fixture {
    material: MaterialBySecret,
}

impl Fixture {
    fn new(names: &[&str]) -> Self {
        let ca = Authority::new("ca").unwrap();
        let material = names
            .iter()
            .map(|n| (secret(n), material(&ca, n)))
            .collect();
        Fixture { material }
    }

    fn key(&self, name: &str) -> &Arc<CertifiedKey> {
        self.material[&secret(name)].certified_key()
    }

    /// Which secret `server_name` resolves to, by pointer.
    fn which(&self, map: &SniMap, server_name: Option<&str>) -> Option<String> {
        let found = map.resolve(server_name)?;
        let by_ptr = self
            .material
            .iter()
            .find(|(_, m)| Arc::ptr_eq(m.certified_key(), found));
        by_ptr.map(|(s, _)| s.name.clone())
    }
}

#[test]
fn an_exact_name_beats_the_wildcard_which_beats_the_default() {
    let f = Fixture::new(&["exact", "wild", "fallback"]);
    let m = model(
        "a",
        "proxy",
        &[("a.foo.com", "exact"), ("*.foo.com", "wild")],
        Some("fallback"),
    );
    let map = SniMap::build(&m, &f.material);
    let which = |name| f.which(&map, name);
    assert_eq!(which(Some("a.foo.com")).as_deref(), Some("exact"));
    assert_eq!(which(Some("A.Foo.COM.")).as_deref(), Some("exact"));
    assert_eq!(which(Some("b.foo.com")).as_deref(), Some("wild"));
    assert_eq!(which(Some("x.b.foo.com")).as_deref(), Some("fallback"));
    assert_eq!(which(Some("foo.com")).as_deref(), Some("fallback"));
    assert_eq!(which(Some("other.test")).as_deref(), Some("fallback"));
    assert_eq!(which(None).as_deref(), Some("fallback"));
    assert!(Arc::ptr_eq(
        map.resolve(Some("a.foo.com")).unwrap(),
        f.key("exact")
    ));
}

#[test]
fn without_a_default_certificate_unknown_names_get_nothing() {
    let f = Fixture::new(&["exact"]);
    let map = SniMap::build(
        &model("a", "proxy", &[("a.foo.com", "exact")], None),
        &f.material,
    );
    assert!(map.resolve(Some("b.foo.com")).is_none());
    assert!(map.resolve(None).is_none());
}

#[test]
fn an_entry_without_material_falls_back_to_the_wildcard_then_the_default() {
    let f = Fixture::new(&["wild", "fallback"]);
    let sni = [
        ("a.foo.com", "broken"),
        ("*.foo.com", "wild"),
        ("b.bar.com", "broken"),
    ];
    let map = SniMap::build(&model("a", "proxy", &sni, Some("fallback")), &f.material);
    assert_eq!(f.which(&map, Some("a.foo.com")).as_deref(), Some("wild"));
    assert_eq!(
        f.which(&map, Some("b.bar.com")).as_deref(),
        Some("fallback")
    );
}
