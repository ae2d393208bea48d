//! The certificates step of the pipeline: after each translation, load the key material of the
//! Secrets the served Ingresses name (reusing what unchanged Secrets gave last time), hand it to
//! the proxy for new TLS handshakes, and add the warnings about unusable Secrets to the
//! translation's diagnostics.

use portico_dataplane_http::Proxy;
use portico_model::Model;
use portico_translate::{Certificates, Config, Objects, Translation};
use std::sync::{Mutex, PoisonError};

/// The certificates served now, kept for the next translation.
#[derive(Debug, Default)]
pub(crate) struct CertificateStage {
    served: Mutex<Certificates>,
}

impl CertificateStage {
    pub(crate) fn apply(
        &self,
        objects: &Objects,
        translation: &mut Translation,
        model: &Model,
        config: &Config,
        proxy: &Proxy,
    ) {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let loaded = portico_translate::certificates(objects, translation, config, &served);
        proxy.set_certificates(model, &loaded.material);
        if !loaded.diagnostics.is_empty() {
            let diagnostics = &mut translation.diagnostics;
            diagnostics.extend(loaded.diagnostics.iter().cloned());
            diagnostics.sort();
            diagnostics.dedup();
        }
        *served = loaded;
    }
}
