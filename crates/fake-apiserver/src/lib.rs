//! A test-only, in-process Kubernetes API server that speaks the real HTTP protocol closely
//! enough for unmodified kube-rs clients (`kube::Api`, `kube::runtime::watcher`, `reflector`):
//! list (selectors, pagination, resourceVersion semantics), watch (replay from a
//! resourceVersion, bookmarks, 410 Expired, streaming lists), get, create, replace, patch (merge,
//! JSON, strategic-as-merge), delete, the `/status` subresource, and `Status` errors.
//!
//! Tests drive it as `kubectl` would ([`FakeApiServer::apply`], [`FakeApiServer::delete`]),
//! inject faults ([`FakeApiServer::cut_watches`], [`FakeApiServer::compact`],
//! [`FakeApiServer::fail_next`]) and observe what clients did ([`FakeApiServer::requests`]).
//!
//! It owns no Portico logic and must never be a dependency of the binary; it depends on nothing
//! of Portico's. Served types: see the table in `resources.rs` (Ingress, IngressClass, Service,
//! Secret, Endpoints, Event (both groups), Namespace, ConfigMap, EndpointSlice, Lease, and the
//! Gateway API's GatewayClass, Gateway, HTTPRoute and ReferenceGrant in `v1` and `v1beta1`,
//! GRPCRoute and ListenerSet in `v1`, TCPRoute and UDPRoute in `v1alpha2`, TLSRoute in `v1alpha3`).
//!
//! What differs from a real API server, beyond the notes in each module: no authentication,
//! authorization, admission, validation of object contents, defaulting, finalizers, owner
//! garbage collection (deleting a Namespace leaves its objects), namespace existence checks,
//! managedFields or server-side apply; the `v1` and `events.k8s.io/v1` Events are two separate
//! stores, and so are the Gateway API's `v1` and `v1beta1` versions of a kind; plain HTTP/1.1 only, no protobuf, no compression; the history is kept whole until
//! [`FakeApiServer::compact`]; uids are unique per process, not random.

mod api;
mod discovery;
mod meta;
mod patch;
mod paths;
mod query;
mod resources;
mod selector;
mod server;
mod status;
mod store;
mod watch;
mod write;

pub use resources::GATEWAY as GATEWAY_API;
use serde_json::Value;
use server::{Failure, Shared, lock};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A running fake API server. Clones share one server; dropping the last clone stops it and
/// drops every open connection.
#[derive(Debug, Clone)]
pub struct FakeApiServer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// One request the server answered.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The raw (still percent-encoded) query string; empty when none.
    pub query: String,
    pub user_agent: Option<String>,
    pub content_type: Option<String>,
    /// The `Accept` header (an addition to the brief's shape: shows metadata-only requests).
    pub accept: Option<String>,
    /// The body, when it was JSON.
    pub body: Option<Value>,
    /// The status code answered (200 for a watch, whatever it then streamed).
    pub status: u16,
}

impl FakeApiServer {
    /// Binds `127.0.0.1:0` and serves until dropped.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start() -> FakeApiServer {
        FakeApiServer::start_without(&[]).await
    }

    /// As [`FakeApiServer::start`], without the API groups (e.g. [`GATEWAY_API`]) or group
    /// versions (`gateway.networking.k8s.io/v1`) in `groups`: discovery does not list them and
    /// their paths answer 404, as on a cluster without their CRDs (or with older ones);
    /// [`FakeApiServer::apply`] of their kinds panics.
    ///
    /// # Panics
    /// When no loopback port can be bound.
    pub async fn start_without(groups: &[&str]) -> FakeApiServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("fake API server: bind 127.0.0.1:0");
        let addr = listener
            .local_addr()
            .expect("fake API server: local address");
        let hidden = groups.iter().map(|g| (*g).to_owned()).collect();
        let shared = Arc::new(Shared::new(hidden));
        let task = tokio::spawn(server::serve(listener, shared.clone()));
        FakeApiServer {
            inner: Arc::new(Inner { shared, addr, task }),
        }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.inner.addr)
    }

    /// Writes a kubeconfig whose current context reaches this server without authentication
    /// (cluster, context and user all named `portico-fake`, namespace `default`).
    ///
    /// # Panics
    /// When the file cannot be written.
    pub fn write_kubeconfig(&self, path: &Path) {
        let yaml = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: portico-fake\n  cluster:\n    server: {url}\n\
             contexts:\n- name: portico-fake\n  context:\n    cluster: portico-fake\n    user: portico-fake\n    namespace: default\n\
             users:\n- name: portico-fake\n  user: {{}}\ncurrent-context: portico-fake\npreferences: {{}}\n",
            url = self.url()
        );
        std::fs::write(path, yaml).unwrap_or_else(|e| {
            panic!("fake API server: write kubeconfig {}: {e}", path.display())
        });
    }

    /// Creates or replaces `object` (found by apiVersion, kind, namespace and name) as `kubectl`
    /// would, and returns what is stored. Keeps the uid across replaces; sets resourceVersion,
    /// creationTimestamp (when missing) and generation; a namespaced object without a namespace
    /// goes to `default`. Unlike `kubectl apply`, the status is replaced too, so tests can set
    /// it. Watches see ADDED or MODIFIED (nothing when the object is unchanged).
    ///
    /// # Panics
    /// On a type the server does not serve, or an object without `metadata.name`.
    pub fn apply(&self, object: Value) -> Value {
        let ty = type_of(&object);
        let t = resources::get(ty);
        if resources::hidden(&self.inner.shared.hidden, t.group, t.version) {
            panic!(
                "fake API server: {} is not served by this server",
                t.api_version()
            );
        }
        self.inner
            .shared
            .store
            .apply(ty, object)
            .unwrap_or_else(|e| panic!("fake API server: apply: {e}"))
    }

    /// Deletes an object; watches see DELETED with the object at a new resourceVersion.
    /// Returns whether it existed. `namespace: None` means `default` for a namespaced kind (and
    /// is ignored for a cluster-scoped one), as for [`FakeApiServer::get`].
    ///
    /// # Panics
    /// On a type the server does not serve.
    pub fn delete(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> bool {
        let key = key(api_version, kind, namespace, name);
        let pre = store::Preconditions::default();
        self.inner.shared.store.delete(&key, &pre, false).is_ok()
    }

    /// The stored object, if any.
    ///
    /// # Panics
    /// On a type the server does not serve.
    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let key = key(api_version, kind, namespace, name);
        self.inner.shared.store.get(&key).map(|o| (*o).clone())
    }

    /// Every stored object of a type, in all namespaces, ordered by namespace and name.
    ///
    /// # Panics
    /// On a type the server does not serve.
    pub fn list(&self, api_version: &str, kind: &str) -> Vec<Value> {
        let ty = type_id(api_version, kind);
        let (_, items) = self
            .inner
            .shared
            .store
            .list(ty, None, None)
            .unwrap_or_default();
        items.into_iter().map(|o| (*o).clone()).collect()
    }

    /// Ends every open watch stream abruptly: the connection drops mid-body, without the
    /// chunked encoding's end, as a restarted API server or a proxy would.
    pub fn cut_watches(&self) {
        self.inner.shared.store.cut_watches();
    }

    /// Forgets the change history up to now: a later watch (or exact list, or continue token)
    /// from an older resourceVersion gets 410 Expired. Open watches go on.
    pub fn compact(&self) {
        self.inner.shared.store.compact();
    }

    /// How often watches that asked for bookmarks (`allowWatchBookmarks=true`) get one; 1 s by
    /// default. Takes effect at each watch's next bookmark.
    pub fn set_bookmark_interval(&self, every: Duration) {
        let ms = u64::try_from(every.as_millis()).unwrap_or(u64::MAX).max(1);
        self.inner
            .shared
            .bookmark_every_ms
            .store(ms, Ordering::Relaxed);
    }

    /// The next request with this method whose `path?query` contains `path_contains` is answered
    /// with `code` (a `Status` with the usual reason for the code) instead of being served.
    /// Several calls queue several failures.
    pub fn fail_next(&self, method: &str, path_contains: &str, code: u16) {
        lock(&self.inner.shared.failures).push_back(Failure {
            method: method.to_string(),
            path_contains: path_contains.to_string(),
            code,
        });
    }

    /// Every request answered so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.inner.shared.log).clone()
    }

    /// The PATCH requests to a `/status` subresource, in order.
    pub fn status_patches(&self) -> Vec<Request> {
        let log = lock(&self.inner.shared.log);
        log.iter()
            .filter(|r| r.method == "PATCH" && r.path.ends_with("/status"))
            .cloned()
            .collect()
    }

    /// TCP connections accepted so far.
    pub fn connection_count(&self) -> usize {
        self.inner
            .shared
            .connections_accepted
            .load(Ordering::Relaxed)
    }

    /// Watch streams opened so far (including those answered with a 410 `ERROR` event).
    pub fn watch_count(&self) -> usize {
        self.inner.shared.watches_opened.load(Ordering::Relaxed)
    }

    /// Waits until at least `count` watch streams were opened (polling every 5 ms), to order a
    /// test's writes after a watcher's (re)connection.
    pub async fn wait_for_watches(&self, count: usize) {
        while self.watch_count() < count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The resourceVersion of the last write.
    pub fn resource_version(&self) -> u64 {
        self.inner.shared.store.current()
    }

    /// The stored Events of both `v1` and `events.k8s.io/v1` (kept apart, unlike the real
    /// server, which serves one storage in both shapes).
    pub fn events(&self) -> Vec<Value> {
        let mut events = self.list("v1", "Event");
        events.extend(self.list("events.k8s.io/v1", "Event"));
        events
    }
}

fn type_of(object: &Value) -> resources::TypeId {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    type_id(api_version, object["kind"].as_str().unwrap_or_default())
}

fn type_id(api_version: &str, kind: &str) -> resources::TypeId {
    resources::by_kind(api_version, kind)
        .unwrap_or_else(|| panic!("fake API server: {api_version} {kind} is not served"))
}

fn key(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> store::Key {
    let ty = type_id(api_version, kind);
    let namespace = if resources::get(ty).namespaced {
        namespace.unwrap_or("default")
    } else {
        ""
    };
    (ty, namespace.to_string(), name.to_string())
}
