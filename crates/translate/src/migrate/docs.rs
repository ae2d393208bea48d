//! docs/migrating-from-ingress-nginx.md shows the annotation and ConfigMap tables as the code
//! has them: rendered from [`ANNOTATIONS`] and [`CONFIG_KEYS`], compared with the page, and
//! rewritten by `PORTICO_BLESS=1 cargo test -p portico-translate migrate::docs`.

use super::CONFIG_KEYS;
use crate::annotations::table::{ANNOTATIONS, Outcome};

fn cell(outcome: Outcome) -> String {
    match outcome.detail() {
        "" => outcome.label().to_owned(),
        detail => format!("{}: {detail}", outcome.label()),
    }
}

fn annotation_table() -> String {
    let mut out = String::from(
        "| annotation (`nginx.ingress.kubernetes.io/…`) | built-in proxy | haproxy |\n| --- | --- | --- |\n",
    );
    for a in ANNOTATIONS.iter().filter(|a| a.nginx) {
        let line = format!(
            "| `{}` | {} | {} |\n",
            a.key,
            cell(a.proxy),
            cell(a.haproxy)
        );
        out.push_str(&line);
    }
    out
}

fn configmap_table() -> String {
    let mut out = String::from("| ConfigMap key | outcome | served by |\n| --- | --- | --- |\n");
    for k in CONFIG_KEYS {
        out.push_str(&format!(
            "| `{}` | {} | {} |\n",
            k.key,
            cell(k.outcome),
            k.by
        ));
    }
    out
}

/// `page` with the text between `<!-- name -->` and `<!-- /name -->` replaced by `table`.
fn with_table(page: &str, name: &str, table: &str) -> Option<String> {
    let (open, close) = (format!("<!-- {name} -->\n"), format!("<!-- /{name} -->"));
    let start = page.find(&open)? + open.len();
    let end = start + page[start..].find(&close)?;
    Some(format!("{}{table}{}", &page[..start], &page[end..]))
}

#[test]
fn the_migration_page_shows_the_tables_the_code_has() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/migrating-from-ingress-nginx.md"
    );
    let page = std::fs::read_to_string(path).expect("the migration page");
    let want = with_table(&page, "annotation-table", &annotation_table())
        .and_then(|p| with_table(&p, "configmap-table", &configmap_table()))
        .expect("the page's table markers");
    if std::env::var("PORTICO_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(path, &want).expect("writing the page");
        return;
    }
    assert!(
        page == want,
        "the page's tables differ from the code's (PORTICO_BLESS=1 rewrites them)"
    );
}
