//! Generic documents (`serde_json::Value`) → typed objects, with the API server's defaulting
//! of `metadata.namespace`. Every failure becomes a diagnostic; nothing here stops a file.

use crate::object::{DecodeError, Kind, Object};
use crate::parse::Parsed;
use portico_model::{Diagnostic, ObjectRef};
use serde_json::{Map, Value};

/// The kind of the diagnostics that are about a file rather than an object in it.
pub const FILE_KIND: &str = "File";

/// The most diagnostics one file gives; the rest are counted in one last "… and N more".
pub const MAX_FILE_DIAGNOSTICS: usize = 100;

/// Collects the objects and diagnostics of one file.
pub(crate) struct Decoder<'a> {
    origin: &'a str,
    out: Parsed,
    /// Diagnostics left out past [`MAX_FILE_DIAGNOSTICS`].
    dropped: usize,
}

/// apiVersion and kind for the items of a typed list (`kind: IngressList`) that omit them.
type ItemDefaults<'v> = Option<(&'v str, &'v str)>;

impl<'a> Decoder<'a> {
    pub fn new(origin: &'a str) -> Self {
        Decoder {
            origin,
            out: Parsed::default(),
            dropped: 0,
        }
    }

    pub fn finish(mut self) -> Parsed {
        if self.dropped > 0 {
            let file = ObjectRef::new(FILE_KIND, "", self.origin);
            let message = format!(
                "… and {} more problems in this file (only the first {MAX_FILE_DIAGNOSTICS} \
                 are shown)",
                self.dropped
            );
            self.out
                .diagnostics
                .push(Diagnostic::error(file, "", message));
        }
        self.out
    }

    /// How many problems were found so far (those left out included).
    pub fn problems(&self) -> usize {
        self.out.diagnostics.len() + self.dropped
    }

    /// How many objects were decoded so far.
    pub fn objects(&self) -> usize {
        self.out.objects.len()
    }

    /// The objects decoded since there were `first`.
    pub fn objects_since(&self, first: usize) -> &[Object] {
        &self.out.objects[first..]
    }

    /// Takes the objects of a document decoded before, unchanged.
    pub fn reuse(&mut self, objects: &[Object]) {
        self.out.objects.extend_from_slice(objects);
    }

    fn report(&mut self, diagnostic: Diagnostic) {
        if self.out.diagnostics.len() < MAX_FILE_DIAGNOSTICS {
            self.out.diagnostics.push(diagnostic);
        } else {
            self.dropped += 1;
        }
    }

    /// Reports a document that is not valid YAML or JSON.
    pub fn syntax_error(&mut self, index: usize, message: String) {
        self.file_error(format!("document[{index}]"), message);
    }

    /// Decodes one parsed document: an object, a list of objects, or a bare array of objects.
    pub fn document(&mut self, index: usize, value: Value) {
        let field = format!("document[{index}]");
        match value {
            Value::Object(map) if is_list(&map) => self.list(&field, map),
            Value::Object(map) => self.object(&field, map, None),
            Value::Array(items) => self.items(&field, items, None),
            Value::Null => {}
            _ => self.file_error(field, "the document is not a Kubernetes object".to_owned()),
        }
    }

    fn list(&mut self, field: &str, mut map: Map<String, Value>) {
        let items = match map.remove("items") {
            Some(Value::Array(items)) => items,
            _ => Vec::new(),
        };
        let api_version = str_field(&map, "apiVersion").unwrap_or_default();
        let kind = str_field(&map, "kind").unwrap_or_default();
        let defaults = kind
            .strip_suffix("List")
            .filter(|item_kind| !item_kind.is_empty())
            .map(|item_kind| (api_version, item_kind));
        self.items(field, items, defaults);
    }

    fn items(&mut self, field: &str, items: Vec<Value>, defaults: ItemDefaults<'_>) {
        for (i, item) in items.into_iter().enumerate() {
            let field = format!("{field}.items[{i}]");
            match item {
                Value::Object(map) => self.object(&field, map, defaults),
                _ => self.file_error(field, "a list item is not a Kubernetes object".to_owned()),
            }
        }
    }

    fn object(&mut self, field: &str, mut map: Map<String, Value>, defaults: ItemDefaults<'_>) {
        if let Some((api_version, kind)) = defaults {
            fill_missing(&mut map, "apiVersion", api_version);
            fill_missing(&mut map, "kind", kind);
        }
        let (Some(api_version), Some(kind)) =
            (str_field(&map, "apiVersion"), str_field(&map, "kind"))
        else {
            let message = "the object has no apiVersion or no kind".to_owned();
            return self.file_error(field.to_owned(), message);
        };
        let Some(known) = Kind::recognise(api_version, kind) else {
            // Debug formatting: the values are the file's, control characters escaped.
            tracing::debug!(
                origin = ?self.origin,
                api_version = ?api_version,
                kind = ?kind,
                "ignoring an object of a kind Portico does not read"
            );
            return;
        };
        default_namespace(&mut map, known);
        let object = object_ref(&map, known);
        if object.name.is_empty() {
            let message = format!("metadata.name is required ({} {field})", self.origin);
            return self.report(Diagnostic::error(object, "metadata.name", message));
        }
        match known.decode(Value::Object(map)) {
            Ok(decoded) => self.out.objects.push(decoded),
            Err(err) => self.report(invalid_field(object, known, &err)),
        }
    }

    fn file_error(&mut self, field: String, message: String) {
        let file = ObjectRef::new(FILE_KIND, "", self.origin);
        self.report(Diagnostic::error(file, field, message));
    }
}

fn is_list(map: &Map<String, Value>) -> bool {
    str_field(map, "kind").is_some_and(|k| k.ends_with("List")) && map.contains_key("items")
}

fn str_field<'v>(map: &'v Map<String, Value>, key: &str) -> Option<&'v str> {
    map.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

fn fill_missing(map: &mut Map<String, Value>, key: &str, value: &str) {
    if str_field(map, key).is_none() {
        map.insert(key.to_owned(), Value::String(value.to_owned()));
    }
}

/// Like `kubectl apply` without `-n`: namespaced objects default to `default`; the API server
/// drops a namespace given to a cluster-scoped object.
fn default_namespace(map: &mut Map<String, Value>, kind: Kind) {
    let Some(Value::Object(meta)) = map.get_mut("metadata") else {
        return;
    };
    if !kind.namespaced() {
        meta.remove("namespace");
    } else if str_field(meta, "namespace").is_none() {
        meta.insert("namespace".to_owned(), Value::String("default".to_owned()));
    }
}

fn object_ref(map: &Map<String, Value>, kind: Kind) -> ObjectRef {
    let meta = map.get("metadata").and_then(Value::as_object);
    let get = |key| meta.and_then(|m| str_field(m, key)).unwrap_or_default();
    let namespace = if kind.namespaced() {
        get("namespace")
    } else {
        ""
    };
    ObjectRef::new(kind.name(), namespace, get("name"))
}

fn invalid_field(object: ObjectRef, kind: Kind, err: &DecodeError) -> Diagnostic {
    let path = err.path().to_string();
    let field = if path == "." { String::new() } else { path };
    let message = if kind == Kind::Secret && is_secret_payload(&field) {
        "invalid value (the content of Secret data is not shown)".to_owned()
    } else {
        err.inner().to_string()
    };
    Diagnostic::error(object, field, message)
}

fn is_secret_payload(field: &str) -> bool {
    ["data", "stringData"].iter().any(|top| {
        field == *top
            || field.starts_with(&format!("{top}."))
            || field.starts_with(&format!("{top}["))
    })
}
