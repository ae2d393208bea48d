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
        if self.field.is_empty() {
            write!(f, "{sev}: {}: {}", self.object, self.message)
        } else {
            write!(
                f,
                "{sev}: {}: {}: {}",
                self.object, self.field, self.message
            )
        }
    }
}
