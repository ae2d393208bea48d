//! The API server's admission jobs that a file source must do itself.

use portico_model::Diagnostic;
use portico_translate::Objects;

/// Assigns the default IngressClass to Ingresses that name none, as the API server's
/// admission plugin does when an Ingress is created. Runs on every reload, over all files:
/// the default may live in another file than the Ingress.
pub(crate) fn admit(objects: &mut Objects) -> Vec<Diagnostic> {
    portico_translate::admission::assign_default_class(objects)
}
