//! kube-rs `Api` calls against the fake: the request/response verbs.

mod common;

use common::{api_code, connect, ingress, start};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

#[tokio::test]
async fn harness_objects_are_listed_and_fetched_by_kube() {
    let (server, client) = start().await;
    let stored = server.apply(ingress("web", "site", json!({"app": "site"})));
    assert_eq!(stored["metadata"]["generation"], 1);
    server.apply(ingress("other", "blog", json!({})));

    let all: Api<Ingress> = Api::all(client.clone());
    let list = all.list(&ListParams::default()).await.expect("list");
    assert_eq!(list.items.len(), 2);
    assert_eq!(list.metadata.resource_version.as_deref(), Some("3"));

    let web: Api<Ingress> = Api::namespaced(client, "web");
    assert_eq!(
        web.list(&ListParams::default())
            .await
            .expect("list")
            .items
            .len(),
        1
    );
    let site = web.get("site").await.expect("get");
    assert_eq!(
        site.metadata.uid.as_deref(),
        stored["metadata"]["uid"].as_str()
    );
    assert_eq!(api_code(web.get("missing").await), Some(404));
}

#[tokio::test]
async fn create_replace_and_delete_round_trip() {
    let (server, client) = start().await;
    let classes: Api<IngressClass> = Api::all(client);
    let class: IngressClass = serde_json::from_value(json!({
        "metadata": {"name": "portico"}, "spec": {"controller": "portico.dev/ingress"}
    }))
    .expect("class");
    let created = classes
        .create(&PostParams::default(), &class)
        .await
        .expect("create");
    assert!(created.metadata.creation_timestamp.is_some());
    assert_eq!(
        api_code(classes.create(&PostParams::default(), &class).await),
        Some(409)
    );

    let mut changed = created.clone();
    changed.spec.get_or_insert_default().controller = Some("other".into());
    let replaced = classes
        .replace("portico", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.metadata.generation, Some(2));
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    assert_ne!(
        replaced.metadata.resource_version,
        created.metadata.resource_version
    );

    classes
        .delete("portico", &DeleteParams::default())
        .await
        .expect("delete");
    assert!(
        server
            .get("networking.k8s.io/v1", "IngressClass", None, "portico")
            .is_none()
    );
    assert_eq!(
        api_code(classes.delete("portico", &DeleteParams::default()).await),
        Some(404)
    );
}

#[tokio::test]
async fn status_patch_changes_only_the_status() {
    let (server, client) = start().await;
    server.apply(ingress("web", "site", json!({})));
    let api: Api<Ingress> = Api::namespaced(client, "web");
    let patch = json!({
        "metadata": {"labels": {"sneaky": "yes"}},
        "spec": {"rules": []},
        "status": {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
    });
    let patched = api
        .patch_status("site", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch status");
    let ip = patched
        .status
        .and_then(|s| s.load_balancer)
        .and_then(|lb| lb.ingress);
    assert_eq!(
        ip.map(|i| i[0].ip.clone()),
        Some(Some("192.0.2.1".to_string()))
    );
    let stored = server
        .get("networking.k8s.io/v1", "Ingress", Some("web"), "site")
        .expect("stored");
    assert_eq!(stored["spec"]["rules"][0]["host"], "site.example");
    assert_eq!(stored["metadata"]["labels"], json!({}));
    assert_eq!(server.status_patches().len(), 1);

    // The main resource keeps the status whatever a write to it says.
    let spec_patch = json!({"spec": {"rules": [{"host": "new.example"}]}, "status": null});
    let after = api
        .patch("site", &PatchParams::default(), &Patch::Merge(&spec_patch))
        .await
        .expect("patch");
    assert!(after.status.and_then(|s| s.load_balancer).is_some());
    assert_eq!(after.metadata.generation, Some(2));
}

#[tokio::test]
async fn json_patch_and_strategic_merge_patch_apply() {
    let (_server, client) = start().await;
    let api: Api<Service> = Api::namespaced(client, "default");
    let svc: Service = serde_json::from_value(json!({
        "metadata": {"name": "backend", "labels": {"a": "1"}}, "spec": {"ports": [{"port": 80}]}
    }))
    .expect("service");
    api.create(&PostParams::default(), &svc)
        .await
        .expect("create");
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels/a", "value": "1"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "2"},
    ]))
    .expect("ops");
    let patched = api
        .patch("backend", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .expect("json patch");
    assert_eq!(
        patched
            .metadata
            .labels
            .and_then(|l| l.get("a").cloned())
            .as_deref(),
        Some("2")
    );
    let strategic = json!({"metadata": {"labels": {"b": "3"}}});
    let patched = api
        .patch(
            "backend",
            &PatchParams::default(),
            &Patch::Strategic(&strategic),
        )
        .await
        .expect("strategic patch");
    assert_eq!(patched.metadata.labels.map(|l| l.len()), Some(2));
    let apply = api
        .patch(
            "backend",
            &PatchParams::apply("t"),
            &Patch::Apply(&strategic),
        )
        .await;
    assert_eq!(api_code(apply), Some(415));
}

#[tokio::test]
async fn lease_update_with_a_stale_version_conflicts() {
    let (_server, client) = start().await;
    let leases: Api<Lease> = Api::namespaced(client, "portico");
    let lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": "leader"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}
    }))
    .expect("lease");
    let first = leases
        .create(&PostParams::default(), &lease)
        .await
        .expect("create");
    let mut taken = first.clone();
    taken.spec.get_or_insert_default().holder_identity = Some("b".into());
    leases
        .replace("leader", &PostParams::default(), &taken)
        .await
        .expect("fresh replace");

    let mut stale = first;
    stale.spec.get_or_insert_default().holder_identity = Some("c".into());
    let conflict = leases
        .replace("leader", &PostParams::default(), &stale)
        .await;
    match conflict {
        Err(kube::Error::Api(status)) => {
            assert_eq!((status.code, status.reason.as_str()), (409, "Conflict"))
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    let stale_patch =
        json!({"metadata": {"resourceVersion": "2"}, "spec": {"holderIdentity": "d"}});
    let patched = leases
        .patch(
            "leader",
            &PatchParams::default(),
            &Patch::Merge(&stale_patch),
        )
        .await;
    assert_eq!(api_code(patched), Some(409));
}

#[tokio::test]
async fn events_are_created_with_generated_names() {
    let (server, client) = start().await;
    let events: Api<Event> = Api::namespaced(client, "web");
    let event: Event = serde_json::from_value(json!({
        "metadata": {"generateName": "site."},
        "eventTime": "2025-01-01T00:00:00.000000Z",
        "reason": "Sync", "action": "Translate", "type": "Normal",
        "reportingController": "portico.dev/ingress", "reportingInstance": "portico-0",
        "regarding": {"kind": "Ingress", "namespace": "web", "name": "site"},
    }))
    .expect("event");
    let created = events
        .create(&PostParams::default(), &event)
        .await
        .expect("create event");
    assert!(
        created
            .metadata
            .name
            .is_some_and(|n| n.starts_with("site.") && n.len() > 5)
    );
    let stored = server.events();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["apiVersion"], "events.k8s.io/v1");
    assert_eq!(stored[0]["metadata"]["namespace"], "web");
}

#[tokio::test]
async fn label_and_field_selectors_filter_lists() {
    let (server, client) = start().await;
    server.apply(ingress("a", "one", json!({"app": "x", "tier": "fe"})));
    server.apply(ingress("a", "two", json!({"app": "y"})));
    server.apply(ingress("b", "three", json!({"app": "x"})));
    let api: Api<Ingress> = Api::all(client);
    let names = |list: kube::core::ObjectList<Ingress>| -> Vec<String> {
        list.items
            .into_iter()
            .filter_map(|i| i.metadata.name)
            .collect()
    };
    let by = |labels: &str, fields: &str| {
        let mut lp = ListParams::default();
        if !labels.is_empty() {
            lp = lp.labels(labels);
        }
        if !fields.is_empty() {
            lp = lp.fields(fields);
        }
        lp
    };
    assert_eq!(
        names(api.list(&by("app=x", "")).await.expect("list")),
        ["one", "three"]
    );
    assert_eq!(
        names(api.list(&by("app=x,tier", "")).await.expect("list")),
        ["one"]
    );
    assert_eq!(
        names(api.list(&by("app!=x", "")).await.expect("list")),
        ["two"]
    );
    assert_eq!(
        names(
            api.list(&by("", "metadata.namespace=b"))
                .await
                .expect("list")
        ),
        ["three"]
    );
    assert_eq!(
        names(
            api.list(&by("app=x", "metadata.name!=one"))
                .await
                .expect("list")
        ),
        ["three"]
    );
    assert_eq!(api_code(api.list(&by("app in x", "")).await), Some(400));
}

#[tokio::test]
async fn lists_page_with_limit_and_continue_at_one_version() {
    let (server, client) = start().await;
    for i in 0..5 {
        server.apply(ingress("web", &format!("site-{i}"), json!({})));
    }
    let api: Api<Ingress> = Api::namespaced(client.clone(), "web");
    let first = api
        .list(&ListParams::default().limit(2))
        .await
        .expect("page 1");
    assert_eq!(first.items.len(), 2);
    let token = first.metadata.continue_.clone().expect("a continue token");
    // A change between pages is not seen: every page is at the first page's version.
    server.apply(ingress("web", "site-4", json!({"changed": "yes"})));
    let second = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await
        .expect("page 2");
    let third_token = second.metadata.continue_.clone().expect("another token");
    let third = api
        .list(&ListParams::default().limit(2).continue_token(&third_token))
        .await
        .expect("page 3");
    assert_eq!(third.metadata.continue_, None);
    assert_eq!(third.items.len(), 1);
    assert_eq!(third.items[0].metadata.labels, Some(Default::default()));
    assert_eq!(
        third.metadata.resource_version,
        first.metadata.resource_version
    );

    // resourceVersion=0 is served from "cache": the limit is ignored (kube itself never sends both).
    let path = "/apis/networking.k8s.io/v1/namespaces/web/ingresses?limit=2&resourceVersion=0";
    let request = http::Request::get(path).body(Vec::new()).expect("request");
    let cached = client.request::<Value>(request).await.expect("cached list");
    assert_eq!(cached["items"].as_array().map(Vec::len), Some(5));

    server.compact();
    let expired = api
        .list(&ListParams::default().limit(2).continue_token(&token))
        .await;
    assert_eq!(api_code(expired), Some(410));
}

#[tokio::test]
async fn bad_bodies_and_injected_failures_are_status_errors() {
    let (server, client) = start().await;
    let request = http::Request::post("/apis/networking.k8s.io/v1/namespaces/web/ingresses")
        .header("content-type", "application/json")
        .body(b"{not json".to_vec())
        .expect("request");
    assert_eq!(api_code(client.request::<Value>(request).await), Some(400));
    let request = http::Request::get("/apis/example.com/v1/widgets")
        .body(Vec::new())
        .expect("request");
    assert_eq!(api_code(client.request::<Value>(request).await), Some(404));

    server.fail_next("GET", "/ingresses", 500);
    let api: Api<Ingress> = Api::all(client);
    assert_eq!(api_code(api.list(&ListParams::default()).await), Some(500));
    // kube's client retries a 503 on its own.
    server.fail_next("GET", "/ingresses", 503);
    assert!(api.list(&ListParams::default()).await.is_ok());
    let statuses: Vec<u16> = server.requests().iter().map(|r| r.status).collect();
    assert_eq!(statuses[statuses.len() - 3..], [500, 503, 200]);
}

#[tokio::test]
async fn discovery_and_version_answer() {
    let (_server, client) = start().await;
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(version.major, "1");
    let groups = client.list_api_groups().await.expect("groups");
    assert!(groups.groups.iter().any(|g| g.name == "networking.k8s.io"));
    let resources = client
        .list_api_group_resources("networking.k8s.io/v1")
        .await
        .expect("resources");
    assert!(
        resources
            .resources
            .iter()
            .any(|r| r.name == "ingresses/status")
    );
}

#[tokio::test]
async fn the_gateway_api_is_discovered_in_both_versions_unless_left_out() {
    use kube::discovery::Discovery;
    use portico_fake_apiserver::{FakeApiServer, GATEWAY_API};
    let (server, client) = start().await;
    let discovery = Discovery::new(client.clone()).filter(&[GATEWAY_API]).run();
    let discovery = discovery.await.expect("discovery");
    let group = discovery
        .get(GATEWAY_API)
        .expect("the Gateway API is served");
    assert_eq!(
        group.versions().collect::<Vec<_>>(),
        ["v1", "v1beta1", "v1alpha3", "v1alpha2"]
    );
    assert_eq!(group.preferred_version(), Some("v1"));
    let kinds = |v| -> Vec<String> {
        let resources = group.versioned_resources(v).into_iter();
        resources.map(|(r, _)| r.kind).collect()
    };
    let all = ["GatewayClass", "Gateway", "HTTPRoute", "ReferenceGrant"];
    assert_eq!(
        kinds("v1"),
        [&all[..], &["GRPCRoute", "ListenerSet"]].concat()
    );
    assert_eq!(kinds("v1beta1"), all);
    assert_eq!(kinds("v1alpha2"), ["TCPRoute", "UDPRoute"]);
    assert_eq!(kinds("v1alpha3"), ["TLSRoute"]);
    let route = json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "web"}, "spec": {}});
    server.apply(route);
    let status = json!({"status": {"parents": []}});
    let path = "/apis/gateway.networking.k8s.io/v1beta1/namespaces/web/httproutes/r/status";
    let request = http::Request::patch(path)
        .header("content-type", "application/merge-patch+json")
        .body(serde_json::to_vec(&status).expect("json"))
        .expect("request");
    let patched: Value = client.request(request).await.expect("status patch");
    assert_eq!(patched["status"], status["status"]);

    // Without the CRDs: not listed, not served.
    let (_server, client) = connect(FakeApiServer::start_without(&[GATEWAY_API]).await).await;
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    assert!(!discovery.has_group(GATEWAY_API));
    assert!(discovery.has_group("networking.k8s.io"));
    let request = http::Request::get("/apis/gateway.networking.k8s.io/v1/gateways")
        .body(vec![])
        .expect("request");
    assert_eq!(api_code(client.request::<Value>(request).await), Some(404));

    // Without one version: the group lists the other, preferred.
    let only_beta = FakeApiServer::start_without(&["gateway.networking.k8s.io/v1"]).await;
    let (_server, client) = connect(only_beta).await;
    let discovery = Discovery::new(client).run().await.expect("discovery");
    let group = discovery.get(GATEWAY_API).expect("the group");
    assert_eq!(
        group.versions().collect::<Vec<_>>(),
        ["v1beta1", "v1alpha3", "v1alpha2"]
    );
    assert_eq!(group.preferred_version(), Some("v1beta1"));
}
