//! The watcher tasks: one kube-runtime watcher per kind feeding [`State`], Secret fetches, and
//! the task that publishes a new [`Loaded`] after changes.

use crate::kinds::Watched;
use crate::state::{Effects, State};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use portico_translate::{Config, Loaded, ObjectKey};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, watch};
use tokio::task::JoinHandle;

/// How long the publisher waits after a change for more before it publishes, so that a burst
/// of events (a rollout's EndpointSlices) becomes one translation.
const COALESCE: Duration = Duration::from_millis(10);

/// How many referenced Secrets are fetched at once. An Ingress list naming 1,000 Secrets that
/// the Secret watcher dropped (listed before the Ingresses named them) would otherwise open
/// 1,000 connections to the API server, whose buffers then sit in the client's pool.
const FETCHES: usize = 8;

/// How often the objects are published without a change, as ingress-nginx syncs status every
/// minute: the report then writes back a status someone else changed.
const RESYNC: Duration = Duration::from_secs(60);

/// Where to watch.
#[derive(Debug, Clone, Default)]
pub struct Scope {
    /// Only this namespace (IngressClasses are cluster-scoped and always watched whole).
    pub namespace: Option<String>,
}

/// The running source: watchers, fetches and the publisher. Dropping it stops them.
#[derive(Debug)]
pub struct KubeSource {
    updates: watch::Receiver<Arc<Loaded>>,
    tasks: Vec<JoinHandle<()>>,
}

impl KubeSource {
    /// Starts watching. The first snapshot is published once every kind has been listed;
    /// until then [`KubeSource::subscribe`]'s receiver holds an empty, never-changed value.
    pub fn start(client: Client, scope: Scope, config: Config) -> KubeSource {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::new(config)),
            changed: Notify::new(),
            client: client.clone(),
            fetches: Semaphore::new(FETCHES),
        });
        let (tx, updates) = watch::channel(Arc::new(Loaded::default()));
        let ns = scope.namespace.as_deref();
        let tasks = vec![
            spawn_watcher::<Ingress>(&shared, scoped(&client, ns)),
            spawn_watcher::<IngressClass>(&shared, Api::all(client.clone())),
            spawn_watcher::<Service>(&shared, scoped(&client, ns)),
            spawn_watcher::<EndpointSlice>(&shared, scoped(&client, ns)),
            spawn_watcher::<Secret>(&shared, scoped(&client, ns)),
            tokio::spawn(crate::gateway_api::run(
                shared.clone(),
                scope.namespace.clone(),
            )),
            tokio::spawn(publish(shared, tx)),
        ];
        KubeSource { updates, tasks }
    }

    /// Every snapshot, newest first; the first real one arrives as a change.
    pub fn subscribe(&self) -> watch::Receiver<Arc<Loaded>> {
        self.updates.clone()
    }
}

impl Drop for KubeSource {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn scoped<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    changed: Notify,
    pub(crate) client: Client,
    /// [`FETCHES`] permits.
    fetches: Semaphore,
}

impl Shared {
    pub(crate) fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave State half-changed in a way that matters
        // more than stopping would: keep serving what it holds.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Acts on what a change asks: publish, fetch Secrets.
    pub(crate) fn effects(self: &Arc<Self>, effects: Effects) {
        if effects.changed {
            self.changed.notify_one();
        }
        for (key, events) in effects.fetch {
            tokio::spawn(fetch(self.clone(), key, events));
        }
    }
}

fn spawn_watcher<K: Watched>(shared: &Arc<Shared>, api: Api<K>) -> JoinHandle<()> {
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    tokio::spawn(run_watcher(shared.clone(), stream))
}

/// Feeds one kind's watch events into the state until the source is dropped. kube-runtime's
/// watcher lists, watches from the list's resourceVersion, resumes after a cut stream from the
/// last version (bookmarks included) and relists on 410 Gone; errors are retried with backoff.
pub(crate) async fn run_watcher<K, S>(shared: Arc<Shared>, stream: S)
where
    K: Watched,
    S: futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    let mut stream = std::pin::pin!(stream);
    // A relist in progress: collected apart, swapped in whole at InitDone.
    let mut relist: Option<Vec<K>> = None;
    while let Some(event) = stream.next().await {
        let effects = match event {
            Ok(watcher::Event::Init) => {
                tracing::debug!(kind = ?K::KIND, "listing");
                relist = Some(Vec::new());
                continue;
            }
            Ok(watcher::Event::InitApply(object)) => {
                relist.get_or_insert_with(Vec::new).push(object);
                continue;
            }
            Ok(watcher::Event::InitDone) => {
                let objects = relist.take().unwrap_or_default();
                tracing::debug!(kind = ?K::KIND, objects = objects.len(), "listed");
                shared.state().relisted(objects)
            }
            Ok(watcher::Event::Apply(object)) => shared.state().apply(object),
            Ok(watcher::Event::Delete(object)) => shared.state().delete(&object),
            Err(error) => {
                tracing::warn!(kind = ?K::KIND, %error, "watch failed; retrying");
                continue;
            }
        };
        shared.effects(effects);
    }
}

/// Fetches one referenced Secret that the state does not keep.
async fn fetch(shared: Arc<Shared>, key: ObjectKey, events: u64) {
    // Never closed.
    let Ok(_permit) = shared.fetches.acquire().await else {
        return;
    };
    let api: Api<Secret> = Api::namespaced(shared.client.clone(), &key.namespace);
    let effects = match api.get_opt(&key.name).await {
        Ok(secret) => shared.state().fetch_done(&key, events, secret),
        Err(error) => {
            // Never the Secret's content: kube's error is the API server's Status or I/O.
            tracing::warn!(secret = %key, %error, "cannot read a referenced Secret");
            shared.state().fetch_failed(&key);
            Effects::default()
        }
    };
    shared.effects(effects);
}

/// Publishes the objects after each burst of changes, once every kind is synced, and every
/// [`RESYNC`] without one: status-only updates do not count as changes (`State::apply`), so
/// a status another writer changed is written back by the next resync at the latest.
async fn publish(shared: Arc<Shared>, tx: watch::Sender<Arc<Loaded>>) {
    loop {
        tokio::select! {
            () = shared.changed.notified() => {}
            () = tokio::time::sleep(RESYNC) => {}
        }
        tokio::time::sleep(COALESCE).await;
        let objects = {
            let state = shared.state();
            if !state.synced() {
                continue;
            }
            state.objects()
        };
        let loaded = Loaded {
            objects,
            diagnostics: vec![],
            files: Default::default(),
        };
        if tx.send(Arc::new(loaded)).is_err() {
            return;
        }
    }
}
