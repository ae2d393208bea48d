//! The watch with paths as users type them: relative to the working directory, through `..`,
//! through a symlink. The file system reports absolute, canonical paths; every change must
//! still be published, and files are still named as the user gave them.
#![cfg(unix)]
#![allow(clippy::unwrap_used)]

mod common;

use common::service;
use common::watching::{
    assert_published, has_service, port_is, replace_atomically, start, wait_for,
};
use portico_source_file::Loaded;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use tempfile::TempDir;

/// `path` relative to the working directory, climbing with `..` to the common ancestor. Tests
/// run on threads of one process, so the working directory is read, never changed.
fn relative_to_cwd(path: &Path) -> PathBuf {
    let cwd = fs::canonicalize(std::env::current_dir().unwrap()).unwrap();
    let path = fs::canonicalize(path).unwrap();
    let shared = (cwd.components().zip(path.components()))
        .take_while(|(a, b)| a == b)
        .count();
    let up = cwd.components().skip(shared).map(|_| OsStr::new(".."));
    let down = path.components().skip(shared).map(|c| c.as_os_str());
    let relative: PathBuf = up.chain(down).collect();
    assert!(
        relative.is_relative() && relative.starts_with(".."),
        "{relative:?}"
    );
    relative
}

/// A new temporary directory and its path relative to the working directory.
fn relative_tempdir() -> (TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let relative = relative_to_cwd(root.path());
    (root, relative)
}

/// Watches `given` (naming the directory `dir` one way or another) and changes `dir`'s files:
/// an edit in place, an atomic replace, a new file, a deletion. Each is published within a
/// second.
async fn every_change_is_published(dir: &Path, given: PathBuf) {
    let file = dir.join("a.yaml");
    fs::write(&file, service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![given]);
    assert!(port_is("a", 80)(&updates.borrow()), "the initial load");

    fs::write(&file, service("default", "a", 81)).unwrap();
    assert_published(&mut updates, port_is("a", 81), "an edit in place").await;

    replace_atomically(&file, &service("default", "a", 82));
    assert_published(&mut updates, port_is("a", 82), "an atomic replace").await;

    fs::write(dir.join("b.yaml"), service("default", "b", 80)).unwrap();
    assert_published(&mut updates, has_service("b"), "a new file").await;

    fs::remove_file(&file).unwrap();
    assert_published(&mut updates, |l| !has_service("a")(l), "a deletion").await;
}

#[tokio::test]
async fn a_directory_given_relative_to_the_working_directory_sees_every_change() {
    let (root, relative) = relative_tempdir();
    every_change_is_published(root.path(), relative).await;
}

#[tokio::test]
async fn a_relative_directory_path_through_dot_dot_sees_every_change() {
    let (root, relative) = relative_tempdir();
    fs::create_dir_all(root.path().join("x/y")).unwrap();
    fs::create_dir(root.path().join("manifests")).unwrap();
    let given = relative.join("x/y/../../manifests");
    every_change_is_published(&root.path().join("manifests"), given).await;
}

#[tokio::test]
async fn an_absolute_directory_path_through_dot_dot_sees_every_change() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir(root.path().join("x")).unwrap();
    fs::create_dir(root.path().join("manifests")).unwrap();
    let given = root.path().join("x/../manifests");
    every_change_is_published(&root.path().join("manifests"), given).await;
}

#[tokio::test]
async fn a_symlink_to_a_directory_given_relatively_sees_every_change() {
    let (root, relative) = relative_tempdir();
    fs::create_dir_all(root.path().join("real/manifests")).unwrap();
    symlink("real/manifests", root.path().join("link")).unwrap();
    let dir = root.path().join("real/manifests");
    every_change_is_published(&dir, relative.join("link")).await;
}

#[tokio::test]
async fn a_symlink_to_a_directory_given_absolutely_sees_every_change() {
    let root = tempfile::tempdir().unwrap();
    fs::create_dir_all(root.path().join("real/manifests")).unwrap();
    symlink("real/manifests", root.path().join("link")).unwrap();
    let dir = root.path().join("real/manifests");
    every_change_is_published(&dir, root.path().join("link")).await;
}

#[tokio::test]
async fn a_symlinked_subdirectory_of_a_relative_directory_sees_every_change() {
    let (root, relative) = relative_tempdir();
    fs::create_dir_all(root.path().join("manifests")).unwrap();
    fs::create_dir(root.path().join("elsewhere")).unwrap();
    symlink("../elsewhere", root.path().join("manifests/team")).unwrap();
    let dir = root.path().join("elsewhere");
    every_change_is_published(&dir, relative.join("manifests")).await;
}

#[tokio::test]
async fn a_single_file_given_relatively_sees_edits_replaces_and_re_creation() {
    let (root, relative) = relative_tempdir();
    let file = root.path().join("only.yaml");
    fs::write(&file, service("default", "a", 80)).unwrap();
    let (_source, mut updates) = start(vec![relative.join("only.yaml")]);

    fs::write(&file, service("default", "a", 81)).unwrap();
    assert_published(&mut updates, port_is("a", 81), "an edit in place").await;
    replace_atomically(&file, &service("default", "a", 82));
    assert_published(&mut updates, port_is("a", 82), "an atomic replace").await;
    fs::remove_file(&file).unwrap();
    wait_for(&mut updates, |l| !has_service("a")(l)).await;
    fs::write(&file, service("default", "a", 83)).unwrap();
    assert_published(&mut updates, port_is("a", 83), "re-created").await;
}

/// The file names in what was published, and the objects its diagnostics name.
fn named(loaded: &Loaded) -> (Vec<PathBuf>, Vec<String>) {
    let diagnosed = loaded.diagnostics.iter().map(|d| d.object.name.clone());
    (loaded.files.to_vec(), diagnosed.collect())
}

#[tokio::test]
async fn files_are_named_as_given_before_and_after_a_change() {
    let (root, relative) = relative_tempdir();
    fs::create_dir_all(root.path().join("real/manifests")).unwrap();
    symlink("real/manifests", root.path().join("link")).unwrap();
    let dir = root.path().join("real/manifests");
    fs::write(dir.join("a.yaml"), service("default", "a", 80)).unwrap();
    fs::write(dir.join("broken.yaml"), "kind: [unclosed\n").unwrap();
    let given = relative.join("x/../link");
    fs::create_dir(root.path().join("x")).unwrap();
    let (_source, mut updates) = start(vec![given.clone()]);
    let expected = (
        vec![given.join("a.yaml"), given.join("broken.yaml")],
        vec![given.join("broken.yaml").display().to_string()],
    );
    assert_eq!(named(&updates.borrow()), expected, "the initial load");

    replace_atomically(&dir.join("a.yaml"), &service("default", "a", 81));
    wait_for(&mut updates, port_is("a", 81)).await;
    assert_eq!(named(&updates.borrow()), expected, "after a change");
}
