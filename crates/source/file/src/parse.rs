//! Text → objects: YAML streams (`---`-separated) or JSON, one document at a time.

use crate::decode::Decoder;
use crate::object::Object;
use crate::skim::Skim;
use crate::split::{Chunk, split_documents};
use portico_model::Diagnostic;
use serde_json::Value;

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
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut decoder = Decoder::new(origin);
    if looks_like_json(text) {
        match serde_json::from_str::<Skim>(text) {
            Ok(Skim(value)) => {
                decoder.document(0, value);
                return decoder.finish();
            }
            Err(err) if origin.ends_with(".json") => {
                decoder.syntax_error(0, err.to_string());
                return decoder.finish();
            }
            // YAML flow style (`{a: 1}`) is not JSON: let the YAML parser have it.
            Err(_) => {}
        }
    }
    for (index, chunk) in split_documents(text).into_iter().enumerate() {
        match parse_chunk(chunk) {
            Ok(values) => values.into_iter().for_each(|v| decoder.document(index, v)),
            Err(message) => decoder.syntax_error(index, message),
        }
    }
    decoder.finish()
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
