//! docs/architecture.md's crate table against the manifests: every workspace crate has a row,
//! every dependency of a crate's manifest is named in its row's "may depend on" column, and
//! every Portico crate that column names is a dependency of the manifest.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's member directories, from the root manifest.
fn members(root_manifest: &str) -> Vec<String> {
    let start = root_manifest.find("members = [").expect("a members list");
    let list = &root_manifest[start..];
    let list = &list[..list.find(']').expect("the end of the members list")];
    list.lines()
        .filter_map(|l| l.trim().strip_prefix('"'))
        .filter_map(|l| l.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// The crate's name and its dependencies by section (`dependencies`, `build-dependencies`,
/// `dev-dependencies`).
fn manifest(text: &str) -> (String, BTreeMap<String, BTreeSet<String>>) {
    let mut name = String::new();
    let mut section = String::new();
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(s) = line.strip_prefix('[') {
            section = s.trim_end_matches(']').to_owned();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = value.trim().trim_matches('"').to_owned();
        }
        if section.ends_with("dependencies") {
            let dep = key.split('.').next().unwrap_or(key).trim();
            deps.entry(section.clone())
                .or_default()
                .insert(dep.to_owned());
        }
    }
    (name, deps)
}

/// Each row of the crate table: the crate's name → its "may depend on" cell.
fn table(doc: &str) -> BTreeMap<String, String> {
    let start = doc
        .find("## Crates and what may depend on what")
        .expect("the crate table's section");
    let mut rows = BTreeMap::new();
    for line in doc[start..].lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        // | crate | owns | may depend on | must not depend on |
        if cells.len() < 5 {
            continue;
        }
        let Some(crate_name) = cells[1].split('`').nth(1) else {
            continue;
        };
        rows.insert(crate_name.to_owned(), cells[3].to_owned());
    }
    rows
}

/// Whether `cell` names `dep` as a word (`portico-x` may be written `x`).
fn names(cell: &str, dep: &str) -> bool {
    let words: BTreeSet<&str> = cell
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    let short = dep.strip_prefix("portico-").unwrap_or(dep);
    words.contains(dep) || words.contains(short)
}

/// What is wrong in `doc`'s crate table against the manifests under `root`.
fn problems(root: &Path, doc: &str) -> Vec<String> {
    let root_manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let rows = table(doc);
    let mut crates = BTreeMap::new();
    for member in members(&root_manifest) {
        let text = std::fs::read_to_string(root.join(&member).join("Cargo.toml")).unwrap();
        let (name, deps) = manifest(&text);
        crates.insert(name, (member, deps));
    }
    let mut out = vec![];
    for (name, (member, deps)) in &crates {
        let Some(cell) = rows.get(name) else {
            out.push(format!("{name} ({member}) has no row"));
            continue;
        };
        for section in ["dependencies", "build-dependencies"] {
            for dep in deps.get(section).into_iter().flatten() {
                if !names(cell, dep) {
                    out.push(format!("{name}: {dep} ({section}) is not in its row"));
                }
            }
        }
        let all: BTreeSet<&String> = deps.values().flatten().collect();
        // `portico`, the binary's crate, is also the product's name in the prose.
        let others = crates
            .keys()
            .filter(|other| *other != name && *other != "portico");
        for other in others {
            if names(cell, other) && !all.contains(other) {
                out.push(format!(
                    "{name}: its row names {other}, its manifest does not"
                ));
            }
        }
    }
    for name in rows.keys().filter(|name| !crates.contains_key(*name)) {
        out.push(format!("{name} has a row but is no workspace crate"));
    }
    out
}

#[test]
fn the_crate_table_names_every_crate_and_every_dependency_of_its_manifest() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let problems = problems(&root, &doc);
    assert!(
        problems.is_empty(),
        "docs/architecture.md's crate table:\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_dependency_missing_from_a_row_is_found() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    // The app's row without its etcd store.
    let doc = doc.replacen("provider-l4, store, store-etcd,", "provider-l4, store,", 1);
    let found = problems(&root, &doc);
    assert!(
        found
            .iter()
            .any(|p| p.contains("portico-store-etcd (dependencies)")),
        "{found:?}"
    );
}
