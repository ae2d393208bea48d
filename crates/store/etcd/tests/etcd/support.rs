//! Shared helpers: configurations with short timeouts, states as maps, waiting for views.

use bytes::Bytes;
use portico_store::kv::{Key, Op, View, changes};
use portico_store_etcd::{Etcd, EtcdConfig, EtcdError, Leadership};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::watch;

pub type State = BTreeMap<Key, Bytes>;

pub fn config(endpoints: Vec<String>) -> EtcdConfig {
    EtcdConfig {
        endpoints,
        dial_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(3),
        ..EtcdConfig::default()
    }
}

pub async fn connect(endpoints: Vec<String>) -> Etcd {
    match Etcd::connect(config(endpoints)).await {
        Ok(etcd) => etcd,
        Err(e) => panic!("connecting: {e}"),
    }
}

/// `count` keys under desired/ whose values all say `tag`.
pub fn state(tag: &str, keys: impl IntoIterator<Item = usize>) -> State {
    keys.into_iter()
        .map(|i| (format!("desired/lb/{i:05}"), Bytes::from(tag.to_owned())))
        .collect()
}

/// A view's entries without their revisions.
pub fn values(view: &View) -> State {
    view.entries
        .iter()
        .map(|(k, e)| (k.clone(), e.value.clone()))
        .collect()
}

pub fn ops(old: &State, new: &State) -> Vec<Op> {
    changes(old, new)
}

/// Waits up to `limit` for a view that `done` accepts; panics with the last one otherwise.
pub async fn wait_view(
    views: &mut watch::Receiver<View>,
    limit: Duration,
    done: impl Fn(&View) -> bool,
) -> View {
    let waited = tokio::time::timeout(limit, async {
        loop {
            let view = views.borrow_and_update().clone();
            if done(&view) {
                return view;
            }
            if views.changed().await.is_err() {
                panic!("the mirror stopped");
            }
        }
    })
    .await;
    match waited {
        Ok(view) => view,
        Err(_) => {
            let last = views.borrow().clone();
            panic!(
                "no expected view within {limit:?}; last: revision {} with {} entries",
                last.revision,
                last.entries.len()
            )
        }
    }
}

/// Every view the mirror publishes, in order, until the task is aborted.
pub fn record(mut views: watch::Receiver<View>) -> (tokio::task::JoinHandle<()>, RecordedViews) {
    let seen = RecordedViews::default();
    let out = seen.clone();
    let task = tokio::spawn(async move {
        loop {
            out.push(views.borrow_and_update().clone());
            if views.changed().await.is_err() {
                return;
            }
        }
    });
    (task, seen)
}

#[derive(Clone, Default)]
pub struct RecordedViews(std::sync::Arc<std::sync::Mutex<Vec<View>>>);

impl RecordedViews {
    fn push(&self, view: View) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(view);
    }

    pub fn take(&self) -> Vec<View> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Commits `next` over what is stored until it is committed, campaigning again when
/// leadership is lost; the commit's revision, `None` when a failed try had landed it already.
pub async fn commit_until_done(
    etcd: &Etcd,
    leader: &mut Leadership,
    stored: &mut State,
    next: &State,
) -> Option<i64> {
    loop {
        match etcd.commit(leader, ops(stored, next)).await {
            Ok(revision) => {
                *stored = next.clone();
                return Some(revision);
            }
            Err(EtcdError::NotLeader { .. }) | Err(EtcdError::LeaseLost) => {
                *leader = campaign(etcd, leader.identity()).await;
            }
            Err(e) => eprintln!("commit failed, retrying: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        *stored = loop {
            match etcd.read_desired().await {
                Ok(view) => break values(&view),
                Err(e) => eprintln!("read_desired failed, retrying: {e}"),
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        if stored == next {
            return None;
        }
    }
}

pub async fn campaign(etcd: &Etcd, identity: &str) -> Leadership {
    let campaign = etcd.campaign(identity, Duration::from_secs(4));
    match tokio::time::timeout(Duration::from_secs(30), campaign).await {
        Ok(Ok(leader)) => leader,
        Ok(Err(e)) => panic!("campaign: {e}"),
        Err(_) => panic!("campaign did not win within 30 s"),
    }
}

/// How long [`wait`] waits.
const LIMIT: Duration = Duration::from_secs(10);

/// The value of `rx` once `done` holds of it; panics naming `what` after [`LIMIT`].
pub async fn wait<T: Clone>(
    rx: &mut watch::Receiver<T>,
    what: &str,
    done: impl Fn(&T) -> bool,
) -> T {
    let waited = tokio::time::timeout(LIMIT, rx.wait_for(|v| done(v))).await;
    match waited {
        Ok(Ok(v)) => v.clone(),
        _ => panic!("{what}: not in time"),
    }
}
