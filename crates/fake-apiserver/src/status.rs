//! API errors and the `Status` objects they become: the one place where a failure turns into
//! what a client reads.

use crate::resources::ResourceType;
use serde_json::{Value, json};

/// A failed request, answered as a `Status` with `status: Failure`.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    /// `details` of the Status (`name`, `group`, `kind`) when one object is concerned.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason_of(code),
            message: message.into(),
            details: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, message)
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(422, message)
    }

    pub fn not_found(ty: &ResourceType, name: &str) -> Self {
        Self::new(404, format!("{} {name:?} not found", qualified(ty))).about(ty, name)
    }

    pub fn already_exists(ty: &ResourceType, name: &str) -> Self {
        Self::new(409, format!("{} {name:?} already exists", qualified(ty)))
            .with_reason("AlreadyExists")
            .about(ty, name)
    }

    pub fn conflict(ty: &ResourceType, name: &str) -> Self {
        let message = format!(
            "Operation cannot be fulfilled on {} {name:?}: the object has been modified; \
             please apply your changes to the latest version and try again",
            qualified(ty)
        );
        Self::new(409, message).about(ty, name)
    }

    /// 410 for a resourceVersion older than the history kept.
    pub fn expired(requested: u64, oldest: u64) -> Self {
        Self::new(
            410,
            format!("too old resource version: {requested} ({oldest})"),
        )
    }

    pub fn with_reason(mut self, reason: &'static str) -> Self {
        self.reason = reason;
        self
    }

    fn about(mut self, ty: &ResourceType, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": ty.group, "kind": ty.plural}));
        self
    }

    /// The `Status` object a client reads.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// `ingresses.networking.k8s.io`, or `services` for the core group, as the real messages say.
fn qualified(ty: &ResourceType) -> String {
    if ty.group.is_empty() {
        ty.plural.to_string()
    } else {
        format!("{}.{}", ty.plural, ty.group)
    }
}

/// The `reason` the real server gives with each status code.
pub fn reason_of(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources;

    #[test]
    fn not_found_names_the_qualified_resource() {
        let ty = resources::get(resources::by_kind("coordination.k8s.io/v1", "Lease").unwrap_or(0));
        let status = ApiError::not_found(ty, "leader").to_status();
        assert_eq!(status["code"], 404);
        assert_eq!(status["reason"], "NotFound");
        assert_eq!(
            status["message"],
            "leases.coordination.k8s.io \"leader\" not found"
        );
        assert_eq!(status["details"]["kind"], "leases");
    }
}
