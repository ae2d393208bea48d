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
