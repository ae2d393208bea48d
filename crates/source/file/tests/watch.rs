//! The watch on a real file system: every change is published well within a second.
#![allow(clippy::unwrap_used)]

mod common;

use common::service;
use common::watching::{SECOND, has_service, port_is, replace_atomically, start, wait_for};
use portico_source_file::{Loaded, ReadLimits, SourceError, watch};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[tokio::test]
async fn the_first_value_is_the_initial_load() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), service("default", "a", 80)).unwrap();
    let (source, updates) = start(vec![dir.path().to_path_buf()]);
    assert!(has_service("a")(&updates.borrow()));
    assert!(has_service("a")(&source.current()));
}

#[tokio::test]
async fn writes_renames_and_deletes_in_a_directory_are_published() {
    let dir = tempfile::tempdir().unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    let file = dir.path().join("a.yaml");

    fs::write(&file, service("default", "a", 80)).unwrap();
    assert!(
        wait_for(&mut updates, has_service("a")).await < SECOND,
        "a new file"
    );

    fs::write(&file, service("default", "a", 81)).unwrap();
    assert!(
        wait_for(&mut updates, port_is("a", 81)).await < SECOND,
        "a modified file"
    );

    replace_atomically(&file, &service("default", "a", 82));
    assert!(
        wait_for(&mut updates, port_is("a", 82)).await < SECOND,
        "an atomic replace"
    );

    fs::remove_file(&file).unwrap();
    let gone = |l: &Loaded| l.objects.services.is_empty();
    assert!(
        wait_for(&mut updates, gone).await < SECOND,
        "a deleted file"
    );
}

#[tokio::test]
async fn a_vim_style_save_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a.yaml");
    fs::write(&file, service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    // vim: probe file, move the original to a backup, write anew, remove the backup.
    fs::write(dir.path().join("4913"), "").unwrap();
    fs::remove_file(dir.path().join("4913")).unwrap();
    let backup = dir.path().join("a.yaml~");
    fs::rename(&file, &backup).unwrap();
    fs::write(&file, service("default", "a", 81)).unwrap();
    fs::remove_file(&backup).unwrap();
    assert!(wait_for(&mut updates, port_is("a", 81)).await < SECOND);
}

#[tokio::test]
async fn a_directory_created_later_is_watched() {
    let dir = tempfile::tempdir().unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    let sub = dir.path().join("team/apps");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("b.yml"), service("default", "b", 80)).unwrap();
    wait_for(&mut updates, has_service("b")).await;
    fs::write(sub.join("b.yml"), service("default", "b", 81)).unwrap();
    assert!(wait_for(&mut updates, port_is("b", 81)).await < SECOND);
}

#[tokio::test]
async fn a_single_watched_file_replaced_atomically_is_seen_and_its_neighbours_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("only.yaml");
    fs::write(&file, service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![file.clone()]);

    fs::write(
        dir.path().join("neighbour.yaml"),
        service("default", "n", 80),
    )
    .unwrap();
    replace_atomically(&file, &service("default", "a", 81));
    assert!(wait_for(&mut updates, port_is("a", 81)).await < SECOND);
    assert!(
        !has_service("n")(&updates.borrow()),
        "only the named file is read"
    );

    fs::remove_file(&file).unwrap();
    wait_for(&mut updates, |l| {
        l.objects.services.is_empty() && !l.diagnostics.is_empty()
    })
    .await;
    fs::write(&file, service("default", "a", 82)).unwrap();
    assert!(
        wait_for(&mut updates, port_is("a", 82)).await < SECOND,
        "re-created"
    );
}

/// The kubelet's layout of a mounted ConfigMap: `a.yaml -> ..data/a.yaml`, `..data -> ..<version>`.
#[cfg(unix)]
fn kubelet_mount(dir: &Path, port: u16) {
    use std::os::unix::fs::symlink;
    kubelet_version(dir, "..2026_01", port);
    symlink("..2026_01", dir.join("..data")).unwrap();
    symlink("..data/a.yaml", dir.join("a.yaml")).unwrap();
}

#[cfg(unix)]
fn kubelet_version(dir: &Path, name: &str, port: u16) {
    fs::create_dir(dir.join(name)).unwrap();
    fs::write(dir.join(name).join("a.yaml"), service("default", "a", port)).unwrap();
}

/// The kubelet's update: a new version directory, `..data` swapped atomically, the old removed.
#[cfg(unix)]
fn kubelet_update(dir: &Path, port: u16) {
    kubelet_version(dir, "..2026_02", port);
    std::os::unix::fs::symlink("..2026_02", dir.join("..data_tmp")).unwrap();
    fs::rename(dir.join("..data_tmp"), dir.join("..data")).unwrap();
    fs::remove_dir_all(dir.join("..2026_01")).unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn a_single_file_of_a_mounted_configmap_is_seen_when_the_kubelet_swaps_it() {
    let dir = tempfile::tempdir().unwrap();
    kubelet_mount(dir.path(), 80);
    let (_source, mut updates) = start(vec![dir.path().join("a.yaml")]);
    assert!(port_is("a", 80)(&updates.borrow()));
    kubelet_update(dir.path(), 81);
    assert!(wait_for(&mut updates, port_is("a", 81)).await < SECOND);
}

#[tokio::test]
async fn nothing_more_is_published_once_a_burst_settles() {
    let dir = tempfile::tempdir().unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    for i in 0..20 {
        fs::write(
            dir.path().join(format!("s{i:02}.yaml")),
            service("default", &format!("s{i:02}"), 80),
        )
        .unwrap();
    }
    wait_for(&mut updates, |l| l.objects.services.len() == 20).await;
    // Nothing else changes, so nothing else is published.
    let more = tokio::time::timeout(Duration::from_millis(300), updates.changed()).await;
    assert!(more.is_err(), "no publication without a change");
}

#[tokio::test]
async fn dropping_the_source_stops_the_watch() {
    let dir = tempfile::tempdir().unwrap();
    let (source, mut updates) = start(vec![dir.path().to_path_buf()]);
    drop(source);
    // The reload thread ends, dropping the sending side.
    let closed = tokio::time::timeout(Duration::from_secs(5), updates.changed()).await;
    assert!(matches!(closed, Ok(Err(_))), "{closed:?}");
}

#[tokio::test]
async fn a_path_whose_directory_does_not_exist_is_an_error_naming_it() {
    let missing = PathBuf::from("/nonexistent/portico/manifests.yaml");
    let err = watch(vec![missing], ReadLimits::default()).unwrap_err();
    assert!(matches!(err, SourceError::Watch { .. }));
    assert!(err.to_string().contains("/nonexistent/portico"), "{err}");
}

#[cfg(unix)]
#[tokio::test]
async fn a_mounted_configmap_directory_is_seen_when_the_kubelet_swaps_it() {
    let dir = tempfile::tempdir().unwrap();
    kubelet_mount(dir.path(), 80);
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    assert!(port_is("a", 80)(&updates.borrow()));
    kubelet_update(dir.path(), 81);
    assert!(wait_for(&mut updates, port_is("a", 81)).await < SECOND);
}

#[tokio::test]
async fn an_editor_temp_file_beside_a_manifest_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    // A temp file with a non-manifest extension, then the real change.
    fs::write(dir.path().join("a.yaml.swp"), service("default", "swp", 1)).unwrap();
    replace_atomically(&dir.path().join("a.yaml"), &service("default", "a", 81));
    wait_for(&mut updates, port_is("a", 81)).await;
    assert!(!has_service("swp")(&updates.borrow()));
}

#[tokio::test]
async fn a_new_file_among_known_ones_is_listed_and_read() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("a.yaml"), service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![dir.path().to_path_buf()]);
    replace_atomically(&dir.path().join("a.yaml"), &service("default", "a", 81));
    fs::create_dir(dir.path().join("sub")).unwrap();
    fs::write(dir.path().join("sub/b.yaml"), service("default", "b", 90)).unwrap();
    assert!(wait_for(&mut updates, |l| port_is("a", 81)(l) && has_service("b")(l)).await < SECOND);
    fs::remove_file(dir.path().join("sub/b.yaml")).unwrap();
    wait_for(&mut updates, |l| !has_service("b")(l)).await;
}
