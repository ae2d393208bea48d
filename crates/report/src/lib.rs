//! Reports to the Kubernetes API (skeleton; being built).
