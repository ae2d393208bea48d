//! Text → objects: YAML streams (`---`-separated) or JSON, one document at a time.

use crate::decode::Decoder;
use crate::object::Object;
use crate::skim::Skim;
use crate::split::{Chunk, split_documents};
use portico_model::Diagnostic;
use serde_json::Value;
use std::collections::HashMap;
use std::hash::{DefaultHasher, Hasher};

/// The objects of one manifest file, and what was wrong with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub objects: Vec<Object>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses a manifest file's text. `origin` names the file in diagnostics. Objects of kinds
/// Portico does not read are skipped; a bad document becomes a diagnostic and never hides the
/// other documents of the file.
pub fn parse_documents(origin: &str, text: &str) -> Parsed {
    parse_reusing(origin, text, &Documents::default()).0
}

/// The objects of a file's YAML documents by the hash and length of each document's text, as
/// the last parse of that file left them. A rewritten multi-document file re-parses only the
/// documents whose text changed; the others keep their objects, the same allocations, so that
/// whatever compares the objects afterwards sees only the changed ones as changed (pointer
/// equality) and a change costs what its documents cost, not what the file costs.
///
/// Only documents that parsed without any diagnostic are kept: a diagnostic names the
/// document's position, which may differ next time. The hash is not cryptographic; whoever
/// can write a colliding document can write the manifests anyway.
#[derive(Debug, Default)]
pub(crate) struct Documents {
    by_text: HashMap<(u64, usize), Vec<Object>>,
}

impl Documents {
    /// How many documents are kept.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.by_text.len()
    }
}

/// Like [`parse_documents`], reusing the objects of `previous`'s documents whose text is
/// unchanged; also returns the documents to reuse next time and how many were parsed.
pub(crate) fn parse_reusing(
    origin: &str,
    text: &str,
    previous: &Documents,
) -> (Parsed, Documents, usize) {
    let mut next = Documents::default();
    let mut parsed = 0;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut decoder = Decoder::new(origin);
    if looks_like_json(text) {
        match serde_json::from_str::<Skim>(text) {
            Ok(Skim(value)) => {
                decoder.document(0, value);
                return (decoder.finish(), next, 1);
            }
            Err(err) if origin.ends_with(".json") => {
                decoder.syntax_error(0, err.to_string());
                return (decoder.finish(), next, 1);
            }
            // YAML flow style (`{a: 1}`) is not JSON: let the YAML parser have it.
            Err(_) => {}
        }
    }
    let chunks = split_documents(text);
    // A file of one document keeps none: the catalog parses a file again only when its text
    // changed, and then that document changed too. At one object per file, 21,000 maps of
    // one entry each cost megabytes for nothing.
    let keep = chunks.len() > 1;
    for (index, chunk) in chunks.into_iter().enumerate() {
        let key = (text_hash(chunk.text), chunk.text.len());
        if let Some(objects) = previous.by_text.get(&key) {
            decoder.reuse(objects);
            next.by_text.insert(key, objects.clone());
            continue;
        }
        parsed += 1;
        let (problems, first) = (decoder.problems(), decoder.objects());
        match parse_chunk(chunk) {
            Ok(values) => values.into_iter().for_each(|v| decoder.document(index, v)),
            Err(message) => decoder.syntax_error(index, message),
        }
        if keep && decoder.problems() == problems {
            next.by_text
                .insert(key, decoder.objects_since(first).to_vec());
        }
    }
    (decoder.finish(), next, parsed)
}

fn text_hash(text: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    hasher.write(text.as_bytes());
    hasher.finish()
}

fn looks_like_json(text: &str) -> bool {
    matches!(text.trim_start().chars().next(), Some('{' | '['))
}

/// One chunk may still hold several documents when they are separated by `...` alone.
fn parse_chunk(chunk: Chunk<'_>) -> Result<Vec<Value>, String> {
    serde_saphyr::from_multiple_with_options::<Skim>(chunk.text, yaml_options())
        .map(|docs| docs.into_iter().map(|Skim(v)| v).collect())
        .map_err(|err| yaml_error_message(&err, chunk.first_line))
}

/// No source snippets in messages (they could quote Secret data); budgets sized for one
/// document holding a `kind: List` of thousands of objects.
fn yaml_options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        with_snippet: false,
        budget: serde_saphyr::budget! {
            max_events: 5_000_000,
            max_nodes: 2_500_000,
        },
    }
}

/// The parser's message, with its line number counted from the start of the file rather than
/// from the start of the document.
fn yaml_error_message(err: &serde_saphyr::Error, first_line: usize) -> String {
    let text = err.to_string();
    let Some(location) = err.location().filter(|l| l.line() > 0) else {
        return text;
    };
    let (line, column) = (location.line() as usize, location.column());
    let relative = format!(" at line {line}, column {column}");
    let base = text.strip_suffix(&relative).unwrap_or(&text);
    let absolute = first_line + line - 1;
    format!("{base} at line {absolute}, column {column}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(name: &str, port: u16) -> String {
        format!(
            "---\napiVersion: v1\nkind: Service\nmetadata: {{name: {name}}}\nspec: {{ports: [{{port: {port}}}]}}\n"
        )
    }

    fn same(a: &Object, b: &Object) -> bool {
        match (a, b) {
            (Object::Service(_, a), Object::Service(_, b)) => std::sync::Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    #[test]
    fn unchanged_documents_keep_their_objects_and_are_not_parsed_again() {
        let text = [service("a", 80), service("b", 80)].concat();
        let (first, documents, parsed) = parse_reusing("f.yaml", &text, &Documents::default());
        assert_eq!((parsed, documents.len(), first.objects.len()), (2, 2, 2));
        let text = [service("a", 80), service("b", 81), service("c", 80)].concat();
        let (second, documents, parsed) = parse_reusing("f.yaml", &text, &documents);
        assert_eq!((parsed, documents.len(), second.objects.len()), (2, 3, 3));
        assert!(same(&first.objects[0], &second.objects[0]), "a is reused");
        assert!(!same(&first.objects[1], &second.objects[1]), "b changed");
        assert_eq!(second, parse_documents("f.yaml", &text), "as a fresh parse");
    }

    #[test]
    fn a_file_of_one_document_keeps_none() {
        let (parsed, documents, count) =
            parse_reusing("f.yaml", &service("a", 80), &Documents::default());
        assert_eq!((count, documents.len(), parsed.objects.len()), (1, 0, 1));
    }

    #[test]
    fn documents_with_problems_are_not_kept() {
        let text = format!("{}---\nkind: Service\n---\n{{broken\n", service("a", 80));
        let (parsed, documents, count) = parse_reusing("f.yaml", &text, &Documents::default());
        assert_eq!(
            (count, documents.len(), parsed.diagnostics.len()),
            (3, 1, 2)
        );
        let (again, _, count) = parse_reusing("f.yaml", &text, &documents);
        assert_eq!(
            count, 2,
            "only the documents with problems are parsed again"
        );
        assert_eq!(again, parsed);
    }
}
