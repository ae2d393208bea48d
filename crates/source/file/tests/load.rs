#![allow(clippy::unwrap_used)]

mod common;

use common::{ingress, ingress_class, service};
use portico_model::{ObjectRef, Severity};
use portico_source_file::{Catalog, ReadLimits, load};
use portico_translate::ObjectKey;
use std::fs;
use std::path::{Path, PathBuf};

fn write(dir: &Path, name: &str, text: &str) {
    let path = dir.join(name);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, text).unwrap();
}

/// A catalog that has read a directory of Services `names` (port 80 each).
fn catalog_of(dir: &Path, names: &[&str]) -> (Catalog, [PathBuf; 1]) {
    for name in names {
        write(dir, &format!("{name}.yaml"), &service("default", name, 80));
    }
    let paths = [dir.to_path_buf()];
    let mut catalog = Catalog::new();
    catalog.reload(&paths);
    (catalog, paths)
}

fn service_port(loaded: &portico_source_file::Loaded, name: &str) -> i32 {
    let service = &loaded.objects.services[&ObjectKey::new("default", name)];
    service.spec.ports[0].port
}

#[test]
fn directories_are_walked_for_yaml_yml_and_json_files_only() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &service("default", "a", 80));
    write(
        dir.path(),
        "nested/deeper/b.yml",
        &service("default", "b", 80),
    );
    let json = r#"{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "c"}}"#;
    write(dir.path(), "nested/c.json", json);
    write(dir.path(), "notes.txt", &service("default", "txt", 80));
    write(dir.path(), ".a.yaml.swp", &service("default", "swap", 80));
    let loaded = load(&[dir.path().to_path_buf()], ReadLimits::default());
    let names: Vec<_> = loaded
        .objects
        .services
        .keys()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(loaded.diagnostics, vec![]);
    assert_eq!(loaded.files.len(), 3);
}

#[test]
fn a_duplicate_object_keeps_the_later_file_and_warns_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &service("default", "web", 80));
    write(dir.path(), "b.yaml", &service("default", "web", 8080));
    let loaded = load(&[dir.path().to_path_buf()], ReadLimits::default());
    assert_eq!(service_port(&loaded, "web"), 8080);
    let [d] = &loaded.diagnostics[..] else {
        panic!("{:?}", loaded.diagnostics)
    };
    assert_eq!(d.severity, Severity::Warning);
    assert_eq!(d.object, ObjectRef::new("Service", "default", "web"));
    assert!(
        d.message.contains("a.yaml") && d.message.contains("b.yaml"),
        "{d}"
    );
}

#[test]
fn an_unreadable_path_is_an_error_and_the_rest_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &service("default", "a", 80));
    let missing = dir.path().join("missing.yaml");
    let loaded = load(
        &[missing.clone(), dir.path().to_path_buf()],
        ReadLimits::default(),
    );
    assert_eq!(loaded.objects.services.len(), 1);
    let d = &loaded.diagnostics[0];
    assert_eq!(
        d.object,
        ObjectRef::new("File", "", &missing.display().to_string())
    );
    assert!(d.is_error());
}

#[test]
fn diagnostics_of_every_file_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "bad.yaml", "kind: Service\n\tbroken: [");
    write(dir.path(), "ing.yaml", &ingress("shop", "web", "web"));
    let loaded = load(&[dir.path().to_path_buf()], ReadLimits::default());
    assert_eq!(loaded.objects.ingresses.len(), 1);
    let bad = dir.path().join("bad.yaml").display().to_string();
    assert_eq!(
        loaded.diagnostics[0].object,
        ObjectRef::new("File", "", &bad)
    );
}

#[test]
fn a_reload_re_parses_only_the_changed_file() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a", "b"]);
    assert_eq!(catalog.parse_count(), 2);
    write(dir.path(), "b.yaml", &service("default", "b", 8080));
    let loaded = catalog.reload(&paths);
    assert_eq!(catalog.parse_count(), 3);
    assert_eq!(service_port(&loaded, "a"), 80);
    assert_eq!(service_port(&loaded, "b"), 8080);
    assert!(
        catalog.reload_if_changed(&paths).is_none(),
        "nothing changed"
    );
    assert_eq!(catalog.parse_count(), 3);
}

#[test]
fn a_rewrite_of_the_same_length_right_after_a_read_is_seen() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &service("default", "a", 80));
    let paths = [dir.path().to_path_buf()];
    let file = dir.path().join("a.yaml");
    let modified = fs::metadata(&file).unwrap().modified().unwrap();
    let mut catalog = Catalog::new();
    catalog.reload(&paths);
    write(dir.path(), "a.yaml", &service("default", "a", 81));
    // As if both writes fell into one tick of a coarse file-system clock.
    let f = fs::File::options().write(true).open(&file).unwrap();
    f.set_modified(modified).unwrap();
    drop(f);
    assert_eq!(fs::metadata(&file).unwrap().modified().unwrap(), modified);
    let loaded = catalog.reload_if_changed(&paths).expect("a change");
    assert_eq!(service_port(&loaded, "a"), 81);
}

#[test]
fn a_deleted_file_takes_its_objects_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a", "b"]);
    fs::remove_file(dir.path().join("b.yaml")).unwrap();
    let loaded = catalog.reload_if_changed(&paths).expect("a change");
    assert_eq!(loaded.objects.services.len(), 1);
    assert_eq!(*loaded.files, vec![dir.path().join("a.yaml")]);
}

#[test]
fn a_file_turning_bad_keeps_its_last_good_objects_until_fixed() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a"]);
    write(dir.path(), "a.yaml", "kind: Service\n\tbroken: [");
    let broken = catalog.reload(&paths);
    assert_eq!(
        service_port(&broken, "a"),
        80,
        "the last good version is served"
    );
    assert!(broken.diagnostics.iter().any(|d| d.is_error()));
    write(dir.path(), "a.yaml", &service("default", "c", 80));
    let fixed = catalog.reload(&paths);
    let names: Vec<_> = fixed
        .objects
        .services
        .keys()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(names, ["c"]);
    assert_eq!(fixed.diagnostics, vec![]);
}

#[test]
fn an_object_turning_bad_keeps_its_last_good_version() {
    let dir = tempfile::tempdir().unwrap();
    let two = service("default", "a", 80) + &service("default", "b", 80);
    write(dir.path(), "a.yaml", &two);
    let paths = [dir.path().to_path_buf()];
    let mut catalog = Catalog::new();
    catalog.reload(&paths);
    let bad_a = service("default", "a", 80).replace("port: 80", "port: nope");
    write(
        dir.path(),
        "a.yaml",
        &(bad_a + &service("default", "b", 81)),
    );
    let loaded = catalog.reload(&paths);
    assert_eq!(service_port(&loaded, "a"), 80);
    assert_eq!(service_port(&loaded, "b"), 81);
    assert_eq!(loaded.diagnostics[0].field, "spec.ports[0].port");
}

#[test]
fn ingresses_without_a_class_get_the_default_class_from_another_file() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "classes.yaml",
        &(ingress_class("portico", true) + &ingress_class("other", false)),
    );
    let named =
        ingress("shop", "named", "web").replace("spec:\n", "spec:\n  ingressClassName: other\n");
    write(
        dir.path(),
        "shop/ing.yaml",
        &(ingress("shop", "web", "web") + &named),
    );
    let loaded = load(&[dir.path().to_path_buf()], ReadLimits::default());
    let class = |name: &str| {
        let ingress = &loaded.objects.ingresses[&ObjectKey::new("shop", name)];
        ingress.spec.ingress_class_name.clone()
    };
    assert_eq!(class("web").as_deref(), Some("portico"));
    assert_eq!(class("named").as_deref(), Some("other"));
}

#[test]
fn a_dirty_reload_reads_only_the_paths_named() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a", "b"]);
    let parses = catalog.parse_count();
    // Both files change on disk (different lengths), but only `a` is reported.
    write(dir.path(), "a.yaml", &service("default", "a", 8081));
    write(dir.path(), "b.yaml", &service("default", "b", 8082));
    let dirty = [dir.path().join("a.yaml")].into_iter().collect();
    let loaded = catalog.reload_dirty(&paths, &dirty).unwrap();
    assert_eq!(service_port(&loaded, "a"), 8081);
    assert_eq!(service_port(&loaded, "b"), 80, "b was not read");
    assert_eq!(catalog.parse_count(), parses + 1);
}

#[test]
fn a_dirty_reload_of_an_unknown_manifest_lists_everything() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a"]);
    write(dir.path(), "new.yaml", &service("default", "new", 80));
    let dirty = [dir.path().join("new.yaml")].into_iter().collect();
    let loaded = catalog.reload_dirty(&paths, &dirty).unwrap();
    assert_eq!(service_port(&loaded, "new"), 80);
    // A hidden temp file alone changes nothing.
    write(dir.path(), ".new.yaml.tmp", &service("default", "tmp", 80));
    let dirty = [dir.path().join(".new.yaml.tmp")].into_iter().collect();
    assert!(catalog.reload_dirty(&paths, &dirty).is_none());
}

/// The Services of `names` with their ports, as one multi-document file.
fn services_file(entries: &[(&str, u16)]) -> String {
    let docs: Vec<String> = entries
        .iter()
        .map(|(name, port)| service("default", name, *port))
        .collect();
    docs.concat()
}

#[test]
fn a_rewritten_multi_document_file_changes_only_the_objects_of_changed_documents() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    write(
        dir.path(),
        "all.yaml",
        &services_file(&[("a", 80), ("b", 80), ("c", 80)]),
    );
    let mut catalog = Catalog::new();
    let before = catalog.reload(&paths);
    assert_eq!(catalog.document_parse_count(), 3);
    write(
        dir.path(),
        "all.yaml",
        &services_file(&[("a", 80), ("b", 8080), ("c", 80)]),
    );
    let after = catalog.reload_if_changed(&paths).expect("the file changed");
    assert_eq!(
        catalog.document_parse_count(),
        4,
        "only b's document is parsed again"
    );
    let key = |name| ObjectKey::new("default", name);
    let same = |name| {
        std::sync::Arc::ptr_eq(
            &before.objects.services[&key(name)],
            &after.objects.services[&key(name)],
        )
    };
    assert!(
        same("a") && same("c"),
        "unchanged documents keep their objects"
    );
    assert!(!same("b"));
    assert_eq!(service_port(&after, "b"), 8080);

    // Reordered and with a new document: only the new one is parsed; all are served.
    write(
        dir.path(),
        "all.yaml",
        &services_file(&[("d", 81), ("c", 80), ("a", 80), ("b", 8080)]),
    );
    let reordered = catalog.reload_if_changed(&paths).unwrap();
    assert_eq!(catalog.document_parse_count(), 5);
    assert_eq!(reordered.objects.services.len(), 4);
    assert_eq!(service_port(&reordered, "d"), 81);
}

#[test]
fn a_document_with_a_problem_is_parsed_again_and_its_diagnostic_names_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    let bad = "apiVersion: v1\nkind: Service\nmetadata: {namespace: default}\n";
    let text = format!("{}---\n{bad}", services_file(&[("a", 80)]));
    write(dir.path(), "all.yaml", &text);
    let mut catalog = Catalog::new();
    let first = catalog.reload(&paths);
    assert_eq!(catalog.document_parse_count(), 2);
    assert_eq!(first.diagnostics.len(), 1, "{:?}", first.diagnostics);
    // Moved to the front: the problem is found again, at its new place.
    let text = format!("{bad}{}", services_file(&[("a", 80)]));
    write(dir.path(), "all.yaml", &text);
    let second = catalog.reload_if_changed(&paths).unwrap();
    assert_eq!(catalog.document_parse_count(), 3, "a's document is reused");
    assert_eq!(second.diagnostics.len(), 1, "{:?}", second.diagnostics);
    assert_eq!(second.objects.services.len(), 1);
}

#[test]
fn a_change_to_one_kind_keeps_the_other_kinds_maps_shared_and_a_class_change_readmits() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    write(
        dir.path(),
        "classes.yaml",
        &(ingress_class("portico", true) + &ingress_class("other", false)),
    );
    write(dir.path(), "ing.yaml", &ingress("shop", "web", "web"));
    // A file of two kinds: its Service changes, its Ingress does not.
    let mixed = |port| ingress("shop", "mixed", "b") + &service("default", "b", port);
    write(dir.path(), "mixed.yaml", &mixed(80));
    write(dir.path(), "svc.yaml", &services_file(&[("a", 80)]));
    let mut catalog = Catalog::new();
    let before = catalog.reload(&paths);

    write(dir.path(), "mixed.yaml", &mixed(8080));
    let after = catalog.reload_if_changed(&paths).expect("the file changed");
    let shared = |a: &portico_source_file::Loaded, b: &portico_source_file::Loaded| {
        (
            std::sync::Arc::ptr_eq(&a.objects.ingresses, &b.objects.ingresses),
            std::sync::Arc::ptr_eq(&a.objects.ingress_classes, &b.objects.ingress_classes),
            std::sync::Arc::ptr_eq(&a.objects.services, &b.objects.services),
        )
    };
    assert_eq!(shared(&before, &after), (true, true, false));
    assert_eq!(service_port(&after, "b"), 8080);
    assert_eq!(service_port(&after, "a"), 80);

    // Another default class: every Ingress without a class is admitted again.
    let class = |loaded: &portico_source_file::Loaded, name: &str| {
        let ingress = &loaded.objects.ingresses[&ObjectKey::new("shop", name)];
        ingress.spec.ingress_class_name.clone()
    };
    assert_eq!(class(&after, "web").as_deref(), Some("portico"));
    write(
        dir.path(),
        "classes.yaml",
        &(ingress_class("portico", false) + &ingress_class("other", true)),
    );
    let reclassed = catalog.reload_if_changed(&paths).expect("the file changed");
    assert_eq!(shared(&after, &reclassed), (false, false, true));
    assert_eq!(class(&reclassed, "web").as_deref(), Some("other"));
    assert_eq!(class(&reclassed, "mixed").as_deref(), Some("other"));
}

#[test]
fn a_duplicate_warning_stays_while_other_kinds_change() {
    let dir = tempfile::tempdir().unwrap();
    let paths = [dir.path().to_path_buf()];
    write(dir.path(), "a.yaml", &service("default", "dup", 80));
    write(dir.path(), "b.yaml", &service("default", "dup", 81));
    write(dir.path(), "ing.yaml", &ingress("shop", "web", "dup"));
    let mut catalog = Catalog::new();
    let first = catalog.reload(&paths);
    let warnings = |loaded: &portico_source_file::Loaded| {
        (loaded.diagnostics.iter())
            .filter(|d| d.object == ObjectRef::new("Service", "default", "dup"))
            .count()
    };
    assert_eq!(warnings(&first), 1);
    write(dir.path(), "ing.yaml", &ingress("shop", "web", "other"));
    let second = catalog.reload_if_changed(&paths).expect("the file changed");
    assert_eq!(warnings(&second), 1, "{:?}", second.diagnostics);
    assert_eq!(service_port(&second, "dup"), 81);
    // The duplicate gone: so is its warning.
    fs::remove_file(dir.path().join("a.yaml")).unwrap();
    let third = catalog.reload_if_changed(&paths).expect("a file went");
    assert_eq!(warnings(&third), 0, "{:?}", third.diagnostics);
    assert_eq!(service_port(&third, "dup"), 81);
}

#[test]
fn reloads_share_the_file_list_until_it_changes_and_a_path_spelled_otherwise_is_still_read() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "a.yaml", &service("default", "a", 80));
    let paths = [dir.path().to_path_buf()];
    let mut catalog = Catalog::new();
    let first = catalog.reload(&paths);
    write(dir.path(), "a.yaml", &service("default", "a", 8081));
    let dirty = [dir.path().join("a.yaml")].into_iter().collect();
    let second = catalog.reload_dirty(&paths, &dirty).unwrap();
    assert_eq!(service_port(&second, "a"), 8081);
    assert!(std::sync::Arc::ptr_eq(&first.files, &second.files));
    // Named with a `.` in it, the path is not the listing's: a full listing reads it.
    write(dir.path(), "a.yaml", &service("default", "a", 80));
    let dirty = [dir.path().join(".").join("a.yaml")].into_iter().collect();
    let third = catalog.reload_dirty(&paths, &dirty).unwrap();
    assert_eq!(service_port(&third, "a"), 80);
    write(dir.path(), "b.yaml", &service("default", "b", 80));
    let dirty = [dir.path().join("b.yaml")].into_iter().collect();
    let fourth = catalog.reload_dirty(&paths, &dirty).unwrap();
    assert!(!std::sync::Arc::ptr_eq(&first.files, &fourth.files));
    assert_eq!(fourth.files.len(), 2);
}

#[test]
fn files_added_and_deleted_between_others_keep_every_file_with_its_own_objects() {
    let dir = tempfile::tempdir().unwrap();
    let (mut catalog, paths) = catalog_of(dir.path(), &["a", "c", "e"]);
    // b and d come between the others in the listing; a goes.
    write(dir.path(), "b.yaml", &service("default", "b", 81));
    write(dir.path(), "d.yaml", &service("default", "d", 82));
    fs::remove_file(dir.path().join("a.yaml")).unwrap();
    let loaded = catalog.reload(&paths);
    assert_eq!(loaded.files.len(), 4);
    assert!(
        !loaded
            .objects
            .services
            .contains_key(&ObjectKey::new("default", "a"))
    );
    // Each known file re-read alone changes its own objects and no other's.
    for (name, port) in [("e", 8083u16), ("b", 8081), ("c", 8082), ("d", 8084)] {
        write(
            dir.path(),
            &format!("{name}.yaml"),
            &service("default", name, port),
        );
        let dirty = [dir.path().join(format!("{name}.yaml"))]
            .into_iter()
            .collect();
        let loaded = catalog.reload_dirty(&paths, &dirty).unwrap();
        assert_eq!(service_port(&loaded, name), i32::from(port));
    }
    let loaded = catalog.reload(&paths);
    let ports = ["b", "c", "d", "e"].map(|n| service_port(&loaded, n));
    assert_eq!(ports, [8081, 8082, 8084, 8083]);
}

/// Hundreds of files are read and parsed on several threads: every file's objects, problems
/// and place in the order (the later file wins a duplicate) are as if read one by one.
#[test]
fn many_files_read_side_by_side_load_as_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..600 {
        write(
            dir.path(),
            &format!("s{i:03}.yaml"),
            &service("default", &format!("s{i}"), 80),
        );
    }
    // The same Service in the first and in the last file; a broken file in the middle.
    write(dir.path(), "s000.yaml", &service("default", "twice", 1));
    write(dir.path(), "s599.yaml", &service("default", "twice", 2));
    write(dir.path(), "s300.yaml", "kind: [");
    let paths = [dir.path().to_path_buf()];
    let mut catalog = Catalog::new();
    let loaded = catalog.reload(&paths);
    assert_eq!(loaded.files.len(), 600);
    assert_eq!(loaded.objects.services.len(), 600 - 3 + 1);
    assert_eq!(service_port(&loaded, "twice"), 2);
    assert_eq!(service_port(&loaded, "s450"), 80);
    let problems: Vec<_> = loaded.diagnostics.iter().map(|d| d.to_string()).collect();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems.iter().any(|p| p.contains("s300.yaml")),
        "{problems:?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("s000.yaml") && p.contains("s599.yaml")),
        "{problems:?}"
    );
    assert_eq!(catalog.parse_count(), 600);
    // Nothing changed: a listing reads nothing again.
    assert!(catalog.reload_if_changed(&paths).is_none());
    assert_eq!(catalog.parse_count(), 600);
}
