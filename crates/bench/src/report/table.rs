//! The Markdown table and the notes under it.

use super::{Report, Row, notes, rows};
use std::fmt::Write as _;

pub fn render(r: Report<'_>) -> String {
    let mut out =
        String::from("| metric | Portico | target | nginx |\n| --- | --- | --- | --- |\n");
    for row in rows(r) {
        line(&mut out, &row);
    }
    let notes = notes(r);
    if !notes.is_empty() {
        out.push('\n');
    }
    for note in notes {
        let _ = writeln!(out, "- {note}");
    }
    out
}

fn line(out: &mut String, row: &Row) {
    let verdict = match row.met {
        Some(true) => " (met)",
        Some(false) => " **MISSED**",
        None => "",
    };
    let _ = writeln!(
        out,
        "| {} | {} | {}{verdict} | {} |",
        row.metric, row.portico, row.target, row.nginx
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missed_target_says_missed() {
        let row = Row {
            metric: "m".into(),
            portico: "4 s".into(),
            target: "< 3 s".into(),
            met: Some(false),
            nginx: "—".into(),
        };
        let mut out = String::new();
        line(&mut out, &row);
        assert_eq!(out, "| m | 4 s | < 3 s **MISSED** | — |\n");
    }
}
