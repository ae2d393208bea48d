//! The manifest-file source, Portico's embedded default: kubectl-style YAML or JSON files →
//! `portico_translate::Objects` plus diagnostics, re-read when the files change. It owns
//! parsing (multi-document YAML, JSON, `List`s), the API server's defaulting that files miss
//! (namespace `default`, the default IngressClass), a per-file cache so a reload re-parses only
//! what changed, and the file-system watch.
//!
//! It reports facts and never translates them. It must not depend on hyper, the data plane,
//! kube or any store; k8s-openapi's API version feature is chosen by the binary, not here.

#![cfg_attr(test, allow(clippy::unwrap_used))]

mod admission;
mod assemble;
mod catalog;
mod decode;
mod object;
mod parse;
mod read;
mod skim;
mod split;
mod target;
mod walk;
mod watch;

pub use catalog::{Catalog, load};
pub use decode::FILE_KIND;
pub use object::Object;
pub use parse::{Parsed, parse_documents};
pub use portico_translate::Loaded;
pub use read::ReadLimits;
pub use watch::{FileSource, SourceError, watch};
