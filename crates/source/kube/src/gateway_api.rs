//! The Gateway API's kinds, watched only where the cluster serves them.
//!
//! At start, discovery reads the `gateway.networking.k8s.io` group. Without it (its CRDs are
//! not installed) each kind counts as listed empty, so Ingresses are served as before, and
//! this is logged once. With it, each kind is watched in the first version the cluster serves
//! of [`VERSIONS`] (`v1`, else `v1beta1`); a kind served in neither counts as listed empty.
//! Discovery is not repeated: CRDs installed later are read after a restart. A kind Portico
//! may not list (403: an RBAC without the Gateway API) counts as listed empty too, with a
//! warning, so that Ingresses are still served.
//!
//! The kinds are watched as dynamic objects and decoded one by one: an object that does not
//! decode is logged with its name and the error, and the others are served (a typed watcher
//! would fail the whole list for one bad object). Each decoded object carries the apiVersion
//! it was read in, which is the one its status is written in.

use crate::kinds::{GatewayApi, Watched};
use crate::watch::{Shared, run_watcher};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, ListParams, PartialObjectMeta};
use kube::discovery::Discovery;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use portico_gateway::{
    GROUP, Gateway, GatewayClass, GrpcRoute, HttpRoute, ListenerSet, ReferenceGrant,
};
use portico_gateway::{L4_ROUTE_VERSIONS, TLS_ROUTE_VERSIONS, TcpRoute, TlsRoute, UdpRoute};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinSet;

/// The versions read, most preferred first.
pub(crate) const VERSIONS: [&str; 2] = ["v1", "v1beta1"];

/// What the cluster serves of the group: each version with its resources.
type Served = Vec<(String, Vec<ApiResource>)>;

/// The kind's name (`HTTPRoute`): k8s-openapi's, not the source's [`crate::Kind`].
fn kind<K: k8s_openapi::Resource>() -> &'static str {
    <K as k8s_openapi::Resource>::KIND
}

/// Discovers the group, then watches its kinds until the source is dropped (this task is
/// aborted, and its watchers with it).
pub(crate) async fn run(shared: Arc<Shared>, namespace: Option<String>) {
    let group = discover(&shared.client).await;
    if group.is_none() {
        tracing::warn!(
            group = GROUP,
            "the Gateway API is absent (its CRDs are not installed): serving Ingresses and Services only"
        );
    }
    let mut watchers = JoinSet::new();
    let ns = namespace.as_deref();
    start::<GatewayClass>(&shared, group.as_ref(), None, &mut watchers).await;
    start::<Gateway>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<HttpRoute>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<ReferenceGrant>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<TcpRoute>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<UdpRoute>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<TlsRoute>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<GrpcRoute>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    start::<ListenerSet>(&shared, group.as_ref(), Some(ns), &mut watchers).await;
    namespaces(&shared, group.is_some(), ns, &mut watchers).await;
    while watchers.join_next().await.is_some() {}
}

/// The group as the cluster serves it, `None` when it does not; retried until the API server
/// answers.
async fn discover(client: &Client) -> Option<Served> {
    let mut wait = Duration::from_millis(500);
    loop {
        let discovery = Discovery::new(client.clone()).filter(&[GROUP]).run().await;
        match discovery {
            Ok(discovery) => {
                let group = discovery.get(GROUP)?;
                let versions = group.versions().map(|v| {
                    let resources = group.versioned_resources(v).into_iter();
                    (v.to_owned(), resources.map(|(r, _)| r).collect())
                });
                return Some(versions.collect());
            }
            Err(error) => {
                tracing::warn!(%error, "cannot discover the Gateway API; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(30));
            }
        }
    }
}

/// The resource of `kind` to read, from what each served version holds: the first of its
/// versions ([`versions`]) that has it.
fn pick<'a>(served: &'a [(String, Vec<ApiResource>)], kind: &str) -> Option<&'a ApiResource> {
    versions(kind).iter().find_map(|want| {
        let (_, resources) = served.iter().find(|(v, _)| v == want)?;
        resources.iter().find(|r| r.kind == kind)
    })
}

/// The versions read of `kind`, most preferred first: TCPRoute and UDPRoute in `v1`, else
/// `v1alpha2`; TLSRoute in `v1`, else `v1alpha3`, else `v1alpha2`; the other kinds in
/// [`VERSIONS`].
fn versions(kind: &str) -> &'static [&'static str] {
    match kind {
        "TCPRoute" | "UDPRoute" => &L4_ROUTE_VERSIONS,
        "TLSRoute" => &TLS_ROUTE_VERSIONS,
        _ => &VERSIONS,
    }
}

/// Watches kind `K` in its served version (namespaced in `ns` when `Some`), or counts it as
/// listed empty when the cluster does not serve it.
async fn start<K: GatewayApi>(
    shared: &Arc<Shared>,
    group: Option<&Served>,
    ns: Option<Option<&str>>,
    watchers: &mut JoinSet<()>,
) {
    let resource = group.and_then(|served| pick(served, kind::<K>())).cloned();
    let Some(resource) = resource else {
        if group.is_some() {
            let versions = versions(kind::<K>()).join(" or ");
            tracing::warn!(
                kind = kind::<K>(),
                "not served by the cluster in {versions}"
            );
        }
        absent::<K>(shared);
        return;
    };
    let client = shared.client.clone();
    let api: Api<DynamicObject> = match ns {
        Some(Some(ns)) => Api::namespaced_with(client, ns, &resource),
        Some(None) | None => Api::all_with(client, &resource),
    };
    // An RBAC without the Gateway API (a deployment older than this version) must not keep
    // the Ingresses from being served: the kind counts as empty instead of retrying forever.
    let probe = api.list(&ListParams::default().limit(1)).await;
    if let Err(kube::Error::Api(status)) = &probe
        && status.code == 403
    {
        tracing::warn!(
            kind = kind::<K>(),
            "not permitted to list (deploy/common/rbac.yaml grants it): not served"
        );
        absent::<K>(shared);
        return;
    }
    tracing::info!(kind = kind::<K>(), api_version = %resource.api_version, "watching");
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let echoes = shared.clone();
    let stream = stream.filter_map(move |event| {
        // The echo of a status write is taken here, its status only decoded (`State::echo`);
        // in the stream's order, as the watcher task applies each event before the next.
        let event = match event {
            Ok(watcher::Event::Apply(object)) => {
                let echo = echoes.state().echo::<K>(&resource.api_version, object);
                match echo {
                    Ok(effects) => {
                        echoes.effects(effects);
                        return std::future::ready(None);
                    }
                    Err(object) => Ok(watcher::Event::Apply(*object)),
                }
            }
            other => other,
        };
        std::future::ready(event.map(|e| typed::<K>(&resource, e)).transpose())
    });
    watchers.spawn(run_watcher(shared.clone(), stream));
}

/// Watches Namespaces, for their labels (listeners' `allowedRoutes.namespaces.selector`),
/// where the Gateway API is served: as metadata only (`PartialObjectMetadata`), kept as name
/// and labels. With `--namespace`, only that Namespace (a field selector on its name): the
/// routes watched are all there. Counted as listed empty without the Gateway API, and when
/// Portico may not list them (403: an RBAC without `namespaces`), with a warning: a selector
/// then admits no route.
async fn namespaces(
    shared: &Arc<Shared>,
    gateway_api: bool,
    ns: Option<&str>,
    watchers: &mut JoinSet<()>,
) {
    if !gateway_api {
        absent::<Namespace>(shared);
        return;
    }
    let api: Api<PartialObjectMeta<Namespace>> = Api::all(shared.client.clone());
    let mut config = watcher::Config::default();
    let mut probe = ListParams::default().limit(1);
    if let Some(ns) = ns {
        let field = format!("metadata.name={ns}");
        config = config.fields(&field);
        probe = probe.fields(&field);
    }
    if let Err(kube::Error::Api(status)) = api.list(&probe).await
        && status.code == 403
    {
        tracing::warn!(
            kind = "Namespace",
            "not permitted to list (deploy/common/rbac.yaml grants it): allowedRoutes \
             namespace selectors admit no route"
        );
        absent::<Namespace>(shared);
        return;
    }
    tracing::info!(kind = "Namespace", "watching (metadata only)");
    let stream = watcher(api, config).default_backoff();
    let stream = stream.map(|event| event.map(from_metadata));
    watchers.spawn(run_watcher(shared.clone(), stream));
}

/// The event with each Namespace made of its metadata (all that is kept of it).
fn from_metadata(event: watcher::Event<PartialObjectMeta<Namespace>>) -> watcher::Event<Namespace> {
    use watcher::Event;
    let namespace = |meta: PartialObjectMeta<Namespace>| Namespace {
        metadata: meta.metadata,
        ..Namespace::default()
    };
    match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(meta) => Event::InitApply(namespace(meta)),
        Event::Apply(meta) => Event::Apply(namespace(meta)),
        Event::Delete(meta) => Event::Delete(namespace(meta)),
    }
}

/// Kind `K` counts as listed, empty.
fn absent<K: Watched>(shared: &Arc<Shared>) {
    let effects = shared.state().relisted::<K>(vec![]);
    shared.effects(effects);
}

/// The event with its object decoded; `None` when it does not decode.
fn typed<K: GatewayApi>(
    resource: &ApiResource,
    event: watcher::Event<DynamicObject>,
) -> Option<watcher::Event<K>> {
    use watcher::Event;
    Some(match event {
        Event::Init => Event::Init,
        Event::InitDone => Event::InitDone,
        Event::InitApply(object) => Event::InitApply(decode(resource, object)?),
        Event::Apply(object) => Event::Apply(decode(resource, object)?),
        Event::Delete(object) => Event::Delete(decode(resource, object)?),
    })
}

/// `object` as a `K` read in `resource`'s version; logged and `None` when it does not decode.
pub(crate) fn decode<K: Watched + k8s_openapi::Resource>(
    resource: &ApiResource,
    object: DynamicObject,
) -> Option<K> {
    let name = format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    );
    // The object's fields besides its metadata are moved, not copied, into what is decoded.
    let DynamicObject { metadata, data, .. } = object;
    let mut fields = match data {
        serde_json::Value::Object(fields) => fields,
        _ => serde_json::Map::new(),
    };
    fields.insert("metadata".into(), serde_json::to_value(metadata).ok()?);
    fields.insert("apiVersion".into(), resource.api_version.clone().into());
    fields.insert("kind".into(), resource.kind.clone().into());
    match serde_json::from_value(serde_json::Value::Object(fields)) {
        Ok(object) => Some(object),
        Err(error) => {
            let name = name.trim_start_matches('/');
            tracing::warn!(kind = kind::<K>(), object = name, %error, "cannot decode; not served");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resource(version: &str, kind: &str) -> ApiResource {
        ApiResource {
            group: GROUP.into(),
            version: version.into(),
            api_version: format!("{GROUP}/{version}"),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        }
    }

    #[test]
    fn v1_is_read_where_served_else_v1beta1() {
        let version = |v: &str, kinds: &[&str]| {
            (v.to_owned(), kinds.iter().map(|k| resource(v, k)).collect())
        };
        let both = [
            version("v1", &["Gateway", "HTTPRoute"]),
            version("v1beta1", &["Gateway", "HTTPRoute", "ReferenceGrant"]),
        ];
        let picked = |kind| pick(&both, kind).map(|r| r.version.as_str());
        assert_eq!(picked("Gateway"), Some("v1"));
        assert_eq!(picked("ReferenceGrant"), Some("v1beta1"));
        assert_eq!(picked("GRPCRoute"), None);
        let grpc = [version("v1", &["GRPCRoute"])];
        assert_eq!(
            pick(&grpc, "GRPCRoute").map(|r| r.version.as_str()),
            Some("v1")
        );
        let alpha = [version("v1alpha2", &["Gateway", "TCPRoute", "UDPRoute"])];
        assert_eq!(pick(&alpha, "Gateway"), None);
        let picked = |kind| pick(&alpha, kind).map(|r| r.version.as_str());
        assert_eq!(picked("TCPRoute"), Some("v1alpha2"));
        assert_eq!(picked("UDPRoute"), Some("v1alpha2"));
        let tls = [
            version("v1alpha2", &["TLSRoute"]),
            version("v1alpha3", &["TLSRoute"]),
        ];
        assert_eq!(
            pick(&tls, "TLSRoute").map(|r| r.version.as_str()),
            Some("v1alpha3")
        );
    }

    #[test]
    fn an_object_that_does_not_decode_is_left_out() {
        let resource = resource("v1beta1", "Gateway");
        let object = |spec: serde_json::Value| -> DynamicObject {
            let object = serde_json::json!({"metadata": {"namespace": "ns", "name": "gw"},
                "spec": spec});
            serde_json::from_value(object).unwrap()
        };
        let good = object(serde_json::json!({"gatewayClassName": "portico", "listeners": []}));
        let gateway: Gateway = decode(&resource, good).unwrap();
        assert_eq!(gateway.api_version, "gateway.networking.k8s.io/v1beta1");
        assert_eq!(gateway.spec.gateway_class_name, "portico");
        let bad = object(serde_json::json!({"listeners": "many"}));
        assert_eq!(decode::<Gateway>(&resource, bad), None);
    }
}
