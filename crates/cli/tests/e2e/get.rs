//! `portico get` against the real binary: each kind, each output format.

use crate::{backends, support::*};

/// The output of `portico get ARGS --server` (the admin API of `p`); it must succeed.
pub fn get(p: &Portico, args: &[&str]) -> String {
    let out = std::process::Command::new(BIN)
        .arg("get")
        .args(args)
        .args(["--server", &p.admin.to_string()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "portico get {args:?}: {stderr}");
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test]
async fn get_prints_each_kind_as_a_table_json_yaml_and_wide() {
    let m = backends("get", &[("web", 2)]).await;
    let ing = ingress(
        "get",
        "site",
        "2026-01-01T00:00:00Z",
        &[("get.test", "/", "Prefix", "web", "80")],
    );
    m.write(
        "ing.yaml",
        &annotated(&ing, &[("portico.dev/proxy-read-timout", "5")]),
    );
    let p = Portico::start(m.path(), &[]).await;
    p.wait_route("get.test", "/", 200, "web").await;

    let table = get(&p, &["loadbalancers"]);
    let lines: Vec<&str> = table.lines().collect();
    assert!(
        lines[0].starts_with("NAME") && lines[0].contains("PROVIDER"),
        "{table}"
    );
    assert!(
        lines[1].starts_with("ingressclass/portico") && lines[1].contains("proxy"),
        "{table}"
    );
    let wide = get(&p, &["lb", "-o", "wide"]);
    assert!(wide.lines().next().unwrap().ends_with("ID"), "{wide}");

    let json: serde_json::Value =
        serde_json::from_str(&get(&p, &["loadbalancers", "-o", "json"])).unwrap();
    assert_eq!(json[0]["name"], "ingressclass/portico");
    let yaml: serde_json::Value =
        serde_saphyr::from_str(&get(&p, &["loadbalancers", "-o", "yaml"])).unwrap();
    assert_eq!(yaml, json, "YAML and JSON say the same");

    let ingresses = get(&p, &["ingresses"]);
    let row = ingresses.lines().nth(1).unwrap();
    assert!(
        row.starts_with("get") && row.contains("site") && row.contains("127.0.0.1"),
        "{ingresses}"
    );
    assert!(row.trim_end().ends_with('1'), "one diagnostic: {ingresses}");

    let pools = get(&p, &["pools"]);
    let row = pools.lines().nth(1).unwrap();
    assert!(row.contains("get_web_80") && row.contains("2/2"), "{pools}");
    assert!(row.contains("ROUND_ROBIN"), "{pools}");

    let diagnostics = get(&p, &["diagnostics"]);
    assert!(
        diagnostics.contains("warning") && diagnostics.contains("Ingress get/site"),
        "{diagnostics}"
    );
    assert!(diagnostics.contains("unknown annotation"), "{diagnostics}");
    let json: serde_json::Value = serde_json::from_str(&get(&p, &["diag", "-o", "json"])).unwrap();
    assert_eq!(json.as_array().unwrap().len(), 1, "{json}");
}

#[test]
fn get_names_the_server_it_cannot_reach() {
    let port = free_port();
    let out = std::process::Command::new(BIN)
        .args(["get", "ingresses", "--server", &format!("127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--server") && stderr.contains("is Portico running there?"),
        "{stderr}"
    );
}
