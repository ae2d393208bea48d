//! Fields whose shape differs between the Kubernetes versions k8s-openapi supports. The binary
//! picks the version, so library code must read them through these helpers.

/// A list field that is `Vec<T>` in some API versions and `Option<Vec<T>>` in others
/// (e.g. `EndpointSlice.endpoints`, optional since 1.36).
pub(crate) trait ListField<T> {
    fn items(&self) -> &[T];
}

impl<T> ListField<T> for Vec<T> {
    fn items(&self) -> &[T] {
        self
    }
}

impl<T> ListField<T> for Option<Vec<T>> {
    fn items(&self) -> &[T] {
        self.as_deref().unwrap_or_default()
    }
}
