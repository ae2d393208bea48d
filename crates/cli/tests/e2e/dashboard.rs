//! The dashboard in headless Chromium against the real binary: `portico demo`'s load balancer,
//! policies (as text), pools and members appear; an edited manifest shows up without reloading
//! the page; no console errors. With `PORTICO_DASHBOARD_SCREENSHOTS=DIR` it also saves
//! `dashboard-overview.png` and `dashboard-loadbalancer.png` there (scripts/dashboard-screenshots.sh).
//! A second test loads the page with 10,000 Ingresses and bounds its bytes and first paint.

use crate::cdp::Browser;
use crate::support::*;
use serde_json::Value;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

async fn demo() -> Portico {
    Portico::spawn(&demo_args()).await
}

/// The directory `portico demo` printed (`Manifests: DIR (…)`).
async fn demo_dir(p: &Portico) -> std::path::PathBuf {
    for _ in 0..100 {
        let lines = p.stdout.lock().unwrap().clone();
        if let Some(line) = lines.iter().find(|l| l.starts_with("Manifests: ")) {
            let rest = line.trim_start_matches("Manifests: ");
            return rest.split(" (").next().unwrap().into();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the demo printed no Manifests line");
}

#[tokio::test]
async fn dashboard_shows_the_demo_and_follows_a_manifest_change() {
    let p = demo().await;
    let dir = demo_dir(&p).await;
    // Some traffic, so that the rates are not all zero.
    for _ in 0..5 {
        p.get("images.example.com", "/").await;
    }
    let browser = Browser::start().await;
    let mut page = browser.page().await;
    let base = format!("http://{}", p.admin);
    page.navigate(&format!("{base}/")).await;
    let text = page
        .wait_text(
            &[
                "ingressclass/portico",
                "demo/virtual-host",
                "Requests/s",
                "Generation",
            ],
            WAIT,
        )
        .await;
    assert!(text.contains("single-service"), "{text}");
    page.drain(Duration::from_millis(2500)).await; // a second sample gives rates
    if let Ok(dir) = std::env::var("PORTICO_DASHBOARD_SCREENSHOTS") {
        let png = page.screenshot().await;
        std::fs::write(format!("{dir}/dashboard-overview.png"), png).unwrap();
    }

    // The load balancer: policies as a person reads them, pools and members.
    let summary = p.admin_json("/api/v1/summary").await;
    let lb = &summary["loadBalancers"][0];
    let id = lb["id"].as_str().unwrap();
    page.eval(&format!("location.hash = '#/lb/{id}'")).await;
    let lbs = p.admin_json("/api/v1/loadbalancers").await;
    let member = &lbs[0]["pools"][0]["members"][0];
    let member = format!("{}:{}", member["address"].as_str().unwrap(), member["port"]);
    let text = page
        .wait_text(
            &[
                "Load balancer ingressclass/portico",
                "Host images.example.com, path prefix / → pool demo/webservice-images:80",
                "Host maps.example.com, path prefix / → pool demo/webservice-maps:80",
                "path prefix /dev → pool demo/webservice-dev:80",
                "pool demo/webservice-images:80",
                "pool demo/webservice-1:80",
                "from Ingress demo/virtual-host",
                &member,
                "ready",
                "requests/s",
            ],
            WAIT,
        )
        .await;
    assert!(
        !text.contains("RedirectToPool"),
        "no Rust debug strings: {text}"
    );
    if let Ok(dir) = std::env::var("PORTICO_DASHBOARD_SCREENSHOTS") {
        page.drain(Duration::from_millis(2500)).await;
        let png = page.screenshot().await;
        std::fs::write(format!("{dir}/dashboard-loadbalancer.png"), png).unwrap();
    }

    // A change to a manifest shows up without reloading: the marker set now survives.
    page.eval("window.__notReloaded = true").await;
    let ingresses = dir.join("ingresses.yaml");
    let mut yaml = std::fs::read_to_string(&ingresses).unwrap();
    yaml.push_str(&ingress(
        "demo",
        "added-later",
        "2026-01-02T00:00:00Z",
        &[("new.example.com", "/shop", "Prefix", "webservice-qa", "80")],
    ));
    let tmp = dir.join(".ingresses.yaml.tmp");
    std::fs::write(&tmp, yaml).unwrap();
    std::fs::rename(&tmp, &ingresses).unwrap();
    page.wait_text(
        &["Host new.example.com, path prefix /shop → pool demo/webservice-qa:80"],
        WAIT,
    )
    .await;
    assert_eq!(page.eval("window.__notReloaded === true").await, true);

    // An Ingress links to the policies it produced.
    page.eval("location.hash = '#/ingresses'").await;
    page.wait_text(
        &["demo/added-later", "ingressclass/portico: its policies"],
        WAIT,
    )
    .await;
    page.eval("document.querySelector('tr[data-ingress=\"demo/added-later\"] a').click()")
        .await;
    // The heading shows before the filtered list arrives: wait for both.
    let text = page
        .wait_text(
            &[
                "Only the policies of Ingress demo/added-later",
                "Host new.example.com",
            ],
            WAIT,
        )
        .await;
    assert!(!text.contains("images.example.com, path"), "{text}");

    page.drain(Duration::from_millis(500)).await;
    let problems = page.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}

#[tokio::test]
async fn dashboard_serves_its_files_with_a_strict_policy() {
    let p = demo().await;
    for (path, content_type) in [
        ("/", "text/html; charset=utf-8"),
        ("/assets/dashboard.js", "text/javascript; charset=utf-8"),
        ("/assets/dashboard.css", "text/css; charset=utf-8"),
        ("/assets/favicon.svg", "image/svg+xml"),
    ] {
        let r = p
            .request(p.admin, "GET", "localhost", path, &[], "")
            .await
            .unwrap();
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.headers["content-type"], content_type, "{path}");
        let csp = r.headers["content-security-policy"].to_str().unwrap();
        assert!(csp.starts_with("default-src 'self';"), "{csp}");
        assert!(!csp.contains("unsafe"), "{csp}");
    }
    let page = p
        .request(p.admin, "GET", "localhost", "/", &[], "")
        .await
        .unwrap();
    let html = String::from_utf8_lossy(&page.body);
    assert!(!html.contains("<script>"), "no inline script: {html}");
    assert!(html.contains("<noscript>"), "{html}");
    let js = p
        .request(p.admin, "GET", "localhost", "/assets/dashboard.js", &[], "")
        .await
        .unwrap();
    let js = String::from_utf8_lossy(&js.body);
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(
            !js.contains(sink),
            "the script never builds HTML from strings: {sink}"
        );
    }
    let missing = p
        .request(p.admin, "GET", "localhost", "/assets/nope.js", &[], "")
        .await
        .unwrap();
    assert_eq!(missing.status, 404);
}

/// 10,000 Ingresses (one Service each, one shared load balancer): the overview transfers
/// little and paints quickly; the load balancer's view pages its 20,000 policies (HTTP and HTTPS). Prints the
/// measurements (docs/benchmarks.md).
#[tokio::test]
#[ignore = "a benchmark (about a minute in a debug build): scripts/dashboard-bench.sh"]
async fn dashboard_stays_small_with_10000_ingresses() {
    const N: usize = 10_000;
    let m = Manifests::new();
    let addrs = echo_pods("web", 1).await;
    let mut y = ingress_class("portico", "portico.dev/ingress-controller", true);
    y.push_str(&service("load", "web", &ready(&addrs)));
    for i in 0..N {
        let host = format!("h{i}.example.com");
        let _ = write!(
            y,
            "{}",
            ingress(
                "load",
                &format!("ing-{i:05}"),
                "2026-01-01T00:00:00Z",
                &[(&host, "/", "Prefix", "web", "80")]
            )
        );
    }
    m.write("all.yaml", &y);
    let p = Portico::start(m.path(), &[]).await;
    let summary = p.admin_json("/api/v1/summary").await;
    assert_eq!(summary["counts"]["ingresses"], N);

    let browser = Browser::start().await;
    let mut page = browser.page().await;
    let start = Instant::now();
    page.navigate(&format!("http://{}/", p.admin)).await;
    page.wait_text(&["load/ing-00000", &format!("1–50 of {N}")], WAIT)
        .await;
    let shown = start.elapsed();
    let perf: Value = page
        .eval(
            "(() => {
                const paint = performance.getEntriesByName('first-contentful-paint')[0];
                const nav = performance.getEntriesByType('navigation')[0];
                const res = performance.getEntriesByType('resource');
                const bytes = nav.transferSize + res.reduce((s, r) => s + r.transferSize, 0);
                return { fcp: paint ? paint.startTime : null, bytes, requests: res.length + 1,
                         nodes: document.getElementsByTagName('*').length };
            })()",
        )
        .await;
    let bytes = perf["bytes"].as_f64().unwrap();
    let fcp = perf["fcp"].as_f64().unwrap_or(f64::NAN);
    println!(
        "dashboard with {N} Ingresses: first contentful paint {fcp:.0} ms, Ingresses shown after \
         {} ms, {:.0} KiB in {} requests, {} DOM elements",
        shown.as_millis(),
        bytes / 1024.0,
        perf["requests"],
        perf["nodes"]
    );
    assert!(bytes < 512.0 * 1024.0, "the overview stays small: {perf}");
    assert!(fcp < 5000.0, "first paint: {perf}");

    // The filter box asks the API for matching Ingresses only.
    page.eval(
        "(() => { const i = document.querySelector('#overview input[type=search]');
                  i.value = 'ing-09999'; i.dispatchEvent(new Event('input')); })()",
    )
    .await;
    page.wait_text(&["load/ing-09999", "1–1 of 1"], WAIT).await;

    // One load balancer with 10,000 policies: paged too.
    let id = summary["loadBalancers"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    page.eval(&format!("location.hash = '#/lb/{id}'")).await;
    let policies = summary["counts"]["policies"].as_u64().unwrap();
    page.wait_text(
        &[&format!("1–50 of {policies}"), "Host h0.example.com"],
        WAIT,
    )
    .await;
    let nodes = page.eval("document.getElementsByTagName('*').length").await;
    assert!(nodes.as_u64().unwrap() < 3000, "{nodes} DOM elements");
    page.drain(Duration::from_millis(300)).await;
    let problems = page.problems();
    assert!(problems.is_empty(), "console problems: {problems:#?}");
}
