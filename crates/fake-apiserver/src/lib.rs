//! A fake Kubernetes API server for tests (skeleton; being built).
