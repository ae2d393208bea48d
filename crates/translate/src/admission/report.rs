//! Collects the admission findings about one object, worded like the API server's field errors.

use portico_model::{Diagnostic, ObjectRef};
use std::fmt::Display;

pub(crate) struct Report {
    object: ObjectRef,
    found: Vec<Diagnostic>,
}

impl Report {
    pub(crate) fn new(object: ObjectRef) -> Self {
        Report {
            object,
            found: Vec::new(),
        }
    }

    /// One error per reason why `value` is invalid.
    pub(crate) fn invalid(&mut self, field: &str, value: impl Display, reasons: Vec<String>) {
        for reason in reasons {
            self.error(field, format!("invalid value \"{value}\": {reason}"));
        }
    }

    pub(crate) fn required(&mut self, field: &str, detail: &str) {
        let message = if detail.is_empty() {
            "required value".to_owned()
        } else {
            format!("required value: {detail}")
        };
        self.error(field, message);
    }

    pub(crate) fn error(&mut self, field: &str, message: impl Into<String>) {
        let object = self.object.clone();
        self.found.push(Diagnostic::error(object, field, message));
    }

    pub(crate) fn warning(&mut self, field: &str, message: impl Into<String>) {
        let object = self.object.clone();
        self.found.push(Diagnostic::warning(object, field, message));
    }

    pub(crate) fn finish(self) -> Vec<Diagnostic> {
        self.found
    }
}

/// `metadata.name`: present, and valid by `check`.
pub(crate) fn check_name(report: &mut Report, name: Option<&str>, check: fn(&str) -> Vec<String>) {
    match name {
        None | Some("") => report.required("metadata.name", "name or generateName is required"),
        Some(name) => report.invalid("metadata.name", name, check(name)),
    }
}
