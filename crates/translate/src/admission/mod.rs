//! The API server's jobs that a file source must do itself: validation on create, and the
//! default IngressClass. Pure functions over k8s-openapi types.

mod default_class;
mod ingress;
mod others;
mod report;

pub use default_class::assign_default_class;
pub use ingress::validate_ingress;
pub use others::{
    validate_endpoint_slice, validate_endpoints, validate_ingress_class, validate_service,
};

#[cfg(test)]
mod tests;
