use crate::ObjectRef;
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The object (or the part named by `field`) is not served.
    Error,
    /// The object is served, but not the way its author may expect.
    Warning,
}

/// One finding about one source object: which object, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Diagnostic {
    pub object: ObjectRef,
    /// JSON-path-like field name, e.g. `spec.rules[0].http.paths[1].path`; empty for the whole object.
    pub field: String,
    pub severity: Severity,
    pub message: String,
}

impl Diagnostic {
    pub fn error(object: ObjectRef, field: impl Into<String>, message: impl Into<String>) -> Self {
        Diagnostic {
            object,
            field: field.into(),
            severity: Severity::Error,
            message: message.into(),
        }
    }

    pub fn warning(
        object: ObjectRef,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            object,
            field: field.into(),
            severity: Severity::Warning,
            message: message.into(),
        }
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }
}

/// The most diagnostics one object keeps; the rest are counted in one last "… and N more".
pub const MAX_OBJECT_DIAGNOSTICS: usize = 50;

/// Keeps, of `diagnostics` sorted by object, the first [`MAX_OBJECT_DIAGNOSTICS`] of each
/// object and replaces the rest by one "… and N more problems on this object" (an error when
/// one of those left out is).
pub fn cap_per_object(diagnostics: &mut Vec<Diagnostic>) {
    let mut out: Vec<Diagnostic> = Vec::with_capacity(diagnostics.len());
    let mut i = 0;
    while i < diagnostics.len() {
        let object = diagnostics[i].object.clone();
        let end = diagnostics[i..]
            .iter()
            .position(|d| d.object != object)
            .map_or(diagnostics.len(), |n| i + n);
        let group = &diagnostics[i..end];
        if group.len() <= MAX_OBJECT_DIAGNOSTICS {
            out.extend_from_slice(group);
        } else {
            let (kept, rest) = group.split_at(MAX_OBJECT_DIAGNOSTICS - 1);
            out.extend_from_slice(kept);
            let message = format!(
                "… and {} more problems on this object (only the first {} are shown)",
                rest.len(),
                MAX_OBJECT_DIAGNOSTICS - 1
            );
            let more = if rest.iter().any(Diagnostic::is_error) {
                Diagnostic::error(object, "", message)
            } else {
                Diagnostic::warning(object, "", message)
            };
            out.push(more);
        }
        i = end;
    }
    *diagnostics = out;
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        // Names, fields and messages quote what users wrote: control characters are escaped
        // so that printing a diagnostic cannot move a terminal's cursor or forge a log line.
        let object = Escaped(&self.object.to_string());
        let (field, message) = (Escaped(&self.field), Escaped(&self.message));
        if self.field.is_empty() {
            write!(f, "{sev}: {object}: {message}")
        } else {
            write!(f, "{sev}: {object}: {field}: {message}")
        }
    }
}

/// Writes a string with its control characters (C0, DEL, C1) as `\u{…}` escapes.
pub struct Escaped<'a>(pub &'a str);

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for part in self.0.split_inclusive(char::is_control) {
            match part.chars().last() {
                Some(c) if c.is_control() => {
                    f.write_str(&part[..part.len() - c.len_utf8()])?;
                    write!(f, "{}", c.escape_unicode())?;
                }
                _ => f.write_str(part)?,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod escape_tests {
    use super::*;

    #[test]
    fn diagnostics_are_capped_per_object() {
        let obj = |n: &str| ObjectRef::new("Ingress", "ns", n);
        let mut ds: Vec<Diagnostic> = (0..120)
            .map(|i| Diagnostic::warning(obj("a"), format!("f{i:03}"), "bad"))
            .chain((0..3).map(|i| Diagnostic::error(obj("b"), format!("f{i}"), "bad")))
            .collect();
        ds[100] = Diagnostic::error(obj("a"), "f100", "bad");
        ds.sort();
        cap_per_object(&mut ds);
        assert_eq!(ds.len(), 53);
        let last_a = &ds[49];
        assert_eq!(last_a.object, obj("a"));
        assert!(
            last_a.message.starts_with("… and 71 more"),
            "{}",
            last_a.message
        );
        assert!(
            last_a.is_error(),
            "an error left out makes the summary an error"
        );
    }

    #[test]
    fn control_characters_are_escaped_when_printed() {
        let d = Diagnostic::error(
            ObjectRef::new("Ingress", "ns", "a\x1b[31mred"),
            "spec.rules[0].host",
            "invalid host \"x\ny\u{9b}z\"",
        );
        let shown = d.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.contains("a\\u{1b}[31mred"), "{shown}");
        assert!(shown.contains("x\\u{a}y\\u{9b}z"), "{shown}");
    }
}
