//! The protocol between the data plane and a pool's members, from the Service port.

mod support;

use portico_model::PoolProtocol;
use serde_json::json;
use support::{ingress, rule, slice, translate_values};

fn pool_protocol(app_protocol: Option<&str>) -> PoolProtocol {
    let mut port = json!({"name": "grpc", "port": 80, "targetPort": 50051});
    if let Some(p) = app_protocol {
        port["appProtocol"] = json!(p);
    }
    let t = translate_values(vec![
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [port]}}),
        slice(
            "default",
            "web-1",
            "web",
            "IPv4",
            json!([{"name": "grpc", "port": 50051}]),
            json!([{"addresses": ["10.0.0.1"]}]),
        ),
        ingress(
            "default",
            "i",
            None,
            json!({"rules": [rule("g.test", &[("/", "Prefix", "web")])]}),
        ),
    ]);
    t.model.load_balancers[0].pools[0].protocol
}

#[test]
fn h2c_app_protocols_make_h2c_pools() {
    assert_eq!(pool_protocol(Some("kubernetes.io/h2c")), PoolProtocol::H2c);
    assert_eq!(pool_protocol(Some("h2c")), PoolProtocol::H2c);
}

#[test]
fn other_or_no_app_protocol_is_http() {
    assert_eq!(pool_protocol(None), PoolProtocol::Http);
    assert_eq!(pool_protocol(Some("http")), PoolProtocol::Http);
    assert_eq!(pool_protocol(Some("kubernetes.io/ws")), PoolProtocol::Http);
}
