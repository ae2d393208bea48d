//! The Kubernetes API source (skeleton; being built).
