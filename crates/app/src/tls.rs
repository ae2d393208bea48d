//! The certificates step of the pipeline: after each translation, load the key material of the
//! Secrets the served Ingresses name and the CA bundles verifying pools name (reusing what
//! unchanged Secrets gave last time), hand them to the providers, and add the warnings about
//! unusable Secrets to the translation's diagnostics.

use portico_translate::{Certificates, Config, Objects, Translation};
use std::sync::{Mutex, PoisonError};

/// The certificates served now, kept for the next translation.
#[derive(Debug, Default)]
pub(crate) struct CertificateStage {
    served: Mutex<Certificates>,
}

impl CertificateStage {
    /// Loads the certificates and CA bundles `translation` names; returns the usable ones by
    /// Secret.
    pub(crate) fn apply(
        &self,
        objects: &Objects,
        translation: &mut Translation,
        config: &Config,
    ) -> (
        portico_provider::Certificates,
        portico_provider::CaBundles,
        portico_model::Credentials,
    ) {
        let mut served = self.served.lock().unwrap_or_else(PoisonError::into_inner);
        let loaded = portico_translate::certificates(objects, translation, config, &served);
        let material = (
            loaded.material.clone(),
            loaded.ca.clone(),
            loaded.credentials.clone(),
        );
        if !loaded.diagnostics.is_empty() {
            let diagnostics = &mut translation.diagnostics;
            diagnostics.extend(loaded.diagnostics.iter().cloned());
            diagnostics.sort();
            diagnostics.dedup();
        }
        *served = loaded;
        material
    }
}
