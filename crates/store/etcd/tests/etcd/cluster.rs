//! Three members, one SIGKILLed then another, while a controller commits in a loop.

use crate::support::{State, campaign, commit_until_done, connect, record, values, wait_view};
use bytes::Bytes;
use portico_store::kv::View;
use portico_testkit::EtcdCluster;
use std::time::{Duration, Instant};

const COMMITS: usize = 40;

/// State `i`: 200 keys (two txns per commit), a third of them absent depending on `i`, every
/// value naming `i`.
fn state_of(i: usize) -> State {
    (0..200)
        .filter(|k| !(k + i).is_multiple_of(3))
        .map(|k| (format!("desired/lb/{k:03}"), Bytes::from(format!("{i}"))))
        .collect()
}

fn index_of(view: &View) -> usize {
    let value = view.entries.values().next().map(|e| e.value.clone());
    let value = value.unwrap_or_else(|| panic!("empty view at {}", view.revision));
    let text = String::from_utf8_lossy(&value).into_owned();
    text.parse().unwrap_or_else(|_| panic!("value {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_of_a_member_loses_doubles_and_reorders_no_commit() {
    let mut cluster = EtcdCluster::start(3);
    let writer = connect(cluster.endpoints()).await;
    let reader = connect(cluster.endpoints()).await;
    let mut leader = campaign(&writer, "controller").await;
    let mirror = reader.mirror_desired(View::default());
    let (recorder, seen) = record(mirror.views());

    let states: Vec<State> = (0..=COMMITS).map(state_of).collect();
    let mut stored = State::new();
    let mut revisions = vec![None; COMMITS + 1];
    let start = Instant::now();
    for i in 1..=COMMITS {
        match i {
            10 => cluster.kill(0),
            20 => cluster.restart(0),
            25 => cluster.kill(2),
            35 => cluster.restart(2),
            _ => {}
        }
        revisions[i] = commit_until_done(&writer, &mut leader, &mut stored, &states[i]).await;
    }
    eprintln!(
        "{COMMITS} commits through two SIGKILLs in {:?}",
        start.elapsed()
    );

    let mut views = mirror.views();
    let last = wait_view(&mut views, Duration::from_secs(20), |v| {
        !v.entries.is_empty() && values(v) == states[COMMITS]
    })
    .await;
    assert_eq!(
        values(&last),
        states[COMMITS],
        "the mirror ends at the writer's state"
    );
    recorder.abort();
    let seen: Vec<View> = seen.take().into_iter().filter(|v| v.revision > 0).collect();
    let mut previous = (0, 0);
    for view in &seen {
        let i = index_of(view);
        assert_eq!(
            values(view),
            states[i],
            "view at {} is whole state {i}",
            view.revision
        );
        assert!(view.revision > previous.0, "revisions move forward");
        assert!(
            i > previous.1,
            "state {i} after state {}: no doubling, no reordering",
            previous.1
        );
        if let Some(revision) = revisions[i] {
            assert_eq!(
                view.revision, revision,
                "state {i} at its commit's revision"
            );
        }
        previous = (view.revision, i);
    }
    let indexes: Vec<usize> = seen.iter().map(index_of).collect();
    eprintln!("the reader published states {indexes:?}");
}
