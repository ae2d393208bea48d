//! The admin API of the real binary: the load-balancer model tree and Prometheus metrics.

use crate::{backends, support::*};

async fn served() -> (Manifests, Portico) {
    let m = backends("adm", &[("web", 2), ("api", 1)]).await;
    m.write(
        "ing.yaml",
        &ingress(
            "adm",
            "site",
            "2026-01-01T00:00:00Z",
            &[
                ("adm.test", "/", "Prefix", "web", "80"),
                ("adm.test", "/api", "Exact", "api", "http"),
            ],
        ),
    );
    let p = Portico::start(m.path(), &[]).await;
    (m, p)
}

#[tokio::test]
async fn loadbalancers_show_the_model_tree_in_evaluation_order() {
    let (_m, p) = served().await;
    let all = p.admin_json("/api/v1/loadbalancers").await;
    let lbs = all.as_array().expect("a JSON array");
    assert_eq!(lbs.len(), 1, "one load balancer per IngressClass: {all}");
    let lb = &lbs[0];
    assert_eq!(lb["provider"], "proxy");
    assert_eq!(lb["origin"]["kind"], "IngressClass");
    assert_eq!(lb["origin"]["name"], "portico");
    let policies = lb["listeners"][0]["policies"].as_array().unwrap();
    let paths: Vec<_> = policies
        .iter()
        .map(|p| {
            let rule = p["rules"].as_array().unwrap().iter();
            let path = rule.clone().find(|r| r["type"] == "PATH").unwrap();
            (path["value"].clone(), path["compare_type"].clone())
        })
        .collect();
    // The longer path is evaluated first; Exact `/api` before Prefix `/`.
    assert_eq!(paths[0].0, "/api");
    assert_eq!(paths[0].1, "EQUAL_TO");
    assert_eq!(paths[1].0, "/");
    let pools = lb["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 2);
    let web = pools.iter().find(|p| p["name"] == "adm_web_80").unwrap();
    assert_eq!(web["members"].as_array().unwrap().len(), 2);
    assert_eq!(web["members"][0]["ready"], true);

    // One load balancer by id, and by an unknown id.
    let id = lb["id"].as_str().unwrap();
    let one = p.admin_json(&format!("/api/v1/loadbalancers/{id}")).await;
    assert_eq!(&one, lb);
    let missing = p
        .request(
            p.admin,
            "GET",
            "localhost",
            "/api/v1/loadbalancers/nope",
            &[],
            "",
        )
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
}

#[tokio::test]
async fn metrics_count_requests_latency_generation_objects_and_diagnostics() {
    let (m, p) = served().await;
    m.write(
        "bad.yaml",
        &ingress(
            "adm",
            "bad",
            "2026-01-01T00:00:00Z",
            &[("bad.test", "no-slash", "Prefix", "web", "80")],
        ),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while p.ingress("adm", "bad").await["diagnostics"][0].is_null() {
        assert!(std::time::Instant::now() < deadline, "bad Ingress not seen");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for _ in 0..3 {
        assert_eq!(p.get("adm.test", "/").await.status, 200);
    }
    assert_eq!(p.get("nothing.test", "/x").await.status, 404);
    let text = p.metrics().await;
    let has = |needle: &str| {
        assert!(
            text.lines().any(|l| l.contains(needle)),
            "/metrics lacks {needle}:\n{text}"
        )
    };
    has("portico_http_requests_total{");
    has("code_class=\"2xx\"");
    has("code_class=\"4xx\"");
    has("pool=\"adm_web_80\"");
    has("portico_upstream_latency_seconds_bucket");
    has("portico_config_generation");
    has("portico_objects{kind=\"Ingress\"} 2");
    has("portico_diagnostics{severity=\"error\"} 1");
    let served = text
        .lines()
        .find(|l| {
            l.starts_with("portico_http_requests_total")
                && l.contains("adm_web_80")
                && l.contains("2xx")
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|n| n.parse::<f64>().ok());
    assert_eq!(
        served,
        Some(3.0),
        "three 2xx requests to adm_web_80:\n{text}"
    );
}

/// A raw HTTP/1.1 GET to the admin API with `host`; the status code, or 0 when the
/// connection closed without an answer.
async fn admin_status(p: &Portico, host: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(p.admin).await.unwrap();
    let req =
        format!("GET /api/v1/ingresses HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    let text = String::from_utf8_lossy(&buf);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[tokio::test]
async fn the_admin_api_refuses_rebound_names_and_silent_connections_do_not_hold_it() {
    let (_m, p) = served().await;
    let port = p.admin.port();
    assert_eq!(admin_status(&p, &format!("127.0.0.1:{port}")).await, 200);
    assert_eq!(admin_status(&p, &format!("localhost:{port}")).await, 200);
    // A DNS-rebinding page reaches 127.0.0.1 under its own name.
    assert_eq!(
        admin_status(&p, &format!("attacker.example:{port}")).await,
        421
    );

    // More silent connections than the cap: the extra ones are closed at once, the others
    // after the header timeout; then the API answers again.
    let mut silent = Vec::new();
    for _ in 0..80 {
        silent.push(tokio::net::TcpStream::connect(p.admin).await.unwrap());
    }
    let start = std::time::Instant::now();
    let mut closed = 0;
    for s in &mut silent {
        use tokio::io::AsyncReadExt;
        let mut b = [0u8; 1];
        match tokio::time::timeout(std::time::Duration::from_secs(15), s.read(&mut b)).await {
            Ok(Ok(0) | Err(_)) => closed += 1,
            other => panic!("a silent admin connection got {other:?}"),
        }
    }
    assert_eq!(closed, 80);
    assert!(
        start.elapsed() < std::time::Duration::from_secs(14),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(admin_status(&p, &format!("127.0.0.1:{port}")).await, 200);
}
