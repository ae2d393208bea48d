//! Class ownership: foreign classes are ignored, the default class is assigned, the legacy
//! annotation is honoured.

use crate::{backends, expect_routes, support::*};

fn with_class(y: &str, class_line: &str) -> String {
    y.replace("  ingressClassName: portico\n", class_line)
}

#[tokio::test]
async fn foreign_class_gets_no_routes_and_no_status() {
    let m = backends("cls", &[("mine", 1), ("theirs", 1)]).await;
    m.write(
        "classes.yaml",
        &ingress_class("nginx", "k8s.io/ingress-nginx", false),
    );
    let mine = ingress(
        "cls",
        "mine",
        "2026-01-01T00:00:00Z",
        &[("mine.test", "/", "Prefix", "mine", "80")],
    );
    let theirs = ingress(
        "cls",
        "theirs",
        "2026-01-01T00:00:00Z",
        &[("theirs.test", "/", "Prefix", "theirs", "80")],
    );
    m.write(
        "ing.yaml",
        &(mine + &with_class(&theirs, "  ingressClassName: nginx\n")),
    );
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[
            ("mine.test", "/", 200, "mine"),
            ("theirs.test", "/", 404, ""),
        ],
    )
    .await;
    let st = p.ingress("cls", "theirs").await;
    assert_eq!(
        st["status"]["loadBalancer"]["ingress"],
        serde_json::json!([])
    );
    assert_eq!(st["owned"], false);
}

#[tokio::test]
async fn default_class_is_assigned_to_ingresses_without_class() {
    let m = backends("dc", &[("web", 1)]).await;
    m.write(
        "classes.yaml",
        &ingress_class("edge", "portico.dev/ingress-controller", true),
    );
    let y = ingress(
        "dc",
        "no-class",
        "2026-01-01T00:00:00Z",
        &[("dc.test", "/", "Prefix", "web", "80")],
    );
    m.write("ing.yaml", &with_class(&y, ""));
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("dc.test", "/", 200, "web")]).await;
    let st = p.ingress("dc", "no-class").await;
    assert_eq!(st["ingressClassName"], "edge");
    assert_eq!(
        st["status"]["loadBalancer"]["ingress"][0]["ip"],
        "127.0.0.1"
    );
}

#[tokio::test]
async fn ingress_without_class_and_no_default_class_is_not_served() {
    let m = backends("nc", &[("web", 1)]).await;
    let y = ingress(
        "nc",
        "no-class",
        "2026-01-01T00:00:00Z",
        &[("nc.test", "/", "Prefix", "web", "80")],
    );
    m.write("ing.yaml", &with_class(&y, ""));
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("nc.test", "/", 404, "")]).await;
}

#[tokio::test]
async fn legacy_class_annotation_is_honoured() {
    let m = backends("legacy", &[("web", 1), ("other", 1)]).await;
    let ours = ingress(
        "legacy",
        "ours",
        "2026-01-01T00:00:00Z",
        &[("ours.test", "/", "Prefix", "web", "80")],
    );
    let ours = with_class(&ours, "").replace(
        "  creationTimestamp",
        "  annotations:\n    kubernetes.io/ingress.class: portico\n  creationTimestamp",
    );
    let other = ingress(
        "legacy",
        "other",
        "2026-01-01T00:00:00Z",
        &[("other.test", "/", "Prefix", "other", "80")],
    );
    let other = with_class(&other, "").replace(
        "  creationTimestamp",
        "  annotations:\n    kubernetes.io/ingress.class: nginx\n  creationTimestamp",
    );
    m.write("ing.yaml", &(ours + &other));
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(
        &p,
        &[("ours.test", "/", 200, "web"), ("other.test", "/", 404, "")],
    )
    .await;
}

#[tokio::test]
async fn custom_ingress_class_flag_is_owned() {
    let m = backends("flag", &[("web", 1)]).await;
    let y = ingress(
        "flag",
        "f",
        "2026-01-01T00:00:00Z",
        &[("flag.test", "/", "Prefix", "web", "80")],
    );
    m.write(
        "ing.yaml",
        &with_class(&y, "  ingressClassName: internal\n"),
    );
    let p = Portico::start(m.path(), &["--ingress-class", "internal"]).await;
    expect_routes(&p, &[("flag.test", "/", 200, "web")]).await;
}

/// Two IngressClasses marked default, as the API server's DefaultIngressClass admission plugin
/// does it today (plugin/pkg/admission/network/defaultingressclass: the newest by
/// creationTimestamp, then the first by name): an Ingress without a class gets the newer one,
/// and the choice is a warning on that class naming both.
#[tokio::test]
async fn with_two_default_classes_the_newest_is_assigned_and_reported() {
    let m = backends("dc2", &[("web", 1)]).await;
    let class = |name: &str, created: &str| {
        ingress_class(name, "portico.dev/ingress-controller", true).replace(
            "metadata:\n",
            &format!("metadata:\n  creationTimestamp: \"{created}\"\n"),
        )
    };
    let classes =
        class("old-edge", "2025-01-01T00:00:00Z") + &class("new-edge", "2026-01-01T00:00:00Z");
    m.write("classes.yaml", &classes);
    let y = ingress(
        "dc2",
        "no-class",
        "2026-02-01T00:00:00Z",
        &[("dc2.test", "/", "Prefix", "web", "80")],
    );
    m.write("ing.yaml", &with_class(&y, ""));
    let p = Portico::start(m.path(), &[]).await;
    expect_routes(&p, &[("dc2.test", "/", 200, "web")]).await;
    assert_eq!(
        p.ingress("dc2", "no-class").await["ingressClassName"],
        "new-edge"
    );
    let diagnostics = p.admin_json("/api/v1/diagnostics").await.to_string();
    assert!(
        diagnostics.contains("2 IngressClasses are marked default")
            && diagnostics.contains("IngressClass")
            && diagnostics.contains("new-edge"),
        "{diagnostics}"
    );
}
