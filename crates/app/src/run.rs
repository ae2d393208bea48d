use crate::metrics::AppMetrics;
use crate::providers::HaproxySettings;
use crate::snapshot::{build_snapshot, status_addresses};
use crate::source::{Source, SourceSettings};
use crate::tls::CertificateStage;
use portico_admin::Admin;
use portico_dataplane_http::{Proxy, ProxyMetrics};
use portico_model::Model;
use portico_provider::Registry;
use portico_source_file::Loaded;
use portico_translate::{Memo, Previous, Translation, translate_incremental};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Everything `portico run` needs, already validated by the command line.
#[derive(Debug, Clone)]
pub struct Settings {
    pub source: SourceSettings,
    pub http_listen: SocketAddr,
    /// The TLS listener of the TERMINATED_HTTPS listeners.
    pub https_listen: SocketAddr,
    pub admin_listen: SocketAddr,
    /// Address written to Ingress status; `None` means the IP of `http_listen`.
    pub publish_address: Option<String>,
    pub translate: portico_translate::Config,
    /// Where the haproxy provider keeps its load balancers, and its executable.
    pub haproxy: HaproxySettings,
    /// Deadlines, sizes and connection caps of both data planes.
    pub limits: portico_model::Limits,
}

/// The addresses actually bound (ports may have been 0).
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub admin: SocketAddr,
}

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("cannot listen on {addr} for {what}: {source}")]
    Bind {
        what: &'static str,
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Source(#[from] portico_source_file::SourceError),
    #[error("{what} {addr}: {reason}")]
    Listen {
        what: &'static str,
        addr: SocketAddr,
        reason: String,
    },
    #[error(transparent)]
    Haproxy(#[from] portico_provider_haproxy::StartError),
    #[error(transparent)]
    Kubernetes(#[from] portico_source_kube::ClientError),
}

async fn bind(what: &'static str, addr: SocketAddr) -> Result<TcpListener, AppError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| AppError::Bind { what, addr, source })
}

/// Runs the all-in-one pipeline until `shutdown` turns true. `on_bound` is called once the
/// listeners are bound, before the first configuration is served.
pub async fn run(
    settings: Settings,
    shutdown: watch::Receiver<bool>,
    on_bound: impl FnOnce(Bound),
) -> Result<(), AppError> {
    // With `--provider haproxy`, haproxy binds the run's listeners instead of the proxy.
    let haproxy_listens = settings.translate.default_provider == portico_provider_haproxy::PROVIDER;
    let (http, https) = if haproxy_listens {
        check_haproxy_listen("HTTP traffic (--http-listen)", settings.http_listen).await?;
        check_haproxy_listen("HTTPS traffic (--https-listen)", settings.https_listen).await?;
        (None, None)
    } else {
        let http = bind("HTTP traffic (--http-listen)", settings.http_listen).await?;
        let https = bind("HTTPS traffic (--https-listen)", settings.https_listen).await?;
        (Some(http), Some(https))
    };
    let admin_listener = bind("the admin API (--admin-listen)", settings.admin_listen).await?;
    let local =
        |l: Option<&TcpListener>, fallback| l.and_then(|l| l.local_addr().ok()).unwrap_or(fallback);
    let bound = Bound {
        http: local(http.as_ref(), settings.http_listen),
        https: local(https.as_ref(), settings.https_listen),
        admin: local(Some(&admin_listener), settings.admin_listen),
    };

    let mut registry = prometheus_client::registry::Registry::default();
    let proxy = Proxy::with_limits(ProxyMetrics::new(&mut registry), settings.limits);
    let app_metrics = AppMetrics::new(&mut registry);
    let admin = Admin::new(Arc::new(registry));
    let default_binds = haproxy_listens.then_some((bound.http, bound.https));
    let class = &settings.translate.ingress_class;
    let (providers, haproxy) = crate::providers::registry(
        proxy.clone(),
        &settings.haproxy,
        default_binds,
        class,
        settings.limits,
    )?;
    let status = status_changes(&providers);

    let mut source = Source::start(&settings, &shutdown).await?;
    let mut updates = source.subscribe();

    let proxy_task = http.map(|http| tokio::spawn(proxy.clone().serve(http, shutdown.clone())));
    let https_task =
        https.map(|https| tokio::spawn(proxy.clone().serve_https(https, shutdown.clone())));
    let admin_task = tokio::spawn(portico_admin::serve(
        admin_listener,
        admin.clone(),
        shutdown.clone(),
    ));
    on_bound(bound);

    let fixed_publish = publish_address(&settings, bound.http);
    let certificates = CertificateStage::default();
    let mut shutdown_rx = shutdown.clone();
    // The Kubernetes source publishes its first snapshot once every kind is listed.
    let mut first = matches!(source, Source::Kube { .. });
    let mut served = None;
    loop {
        if !first {
            let publish = match source.published() {
                Some(rx) => status_addresses_of(&rx.borrow_and_update()),
                None => fixed_publish.clone(),
            };
            let pipeline = Pipeline {
                settings: &settings,
                providers: &providers,
                admin: &admin,
                metrics: &app_metrics,
                publish: &publish,
                certificates: &certificates,
                source: &source,
            };
            let loaded = updates.borrow_and_update().clone();
            served = Some(pipeline.apply(loaded, served.take()));
        }
        let published = async {
            match source.published() {
                Some(rx) => rx.changed().await.is_ok(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = updates.changed() => {
                if changed.is_err() { break }
                first = false;
            }
            // A provider's status changed (serving, a rejected configuration): publish it.
            () = status.notified() => {}
            // `--publish-service` has new addresses: status changes.
            true = published => {}
            _ = shutdown_rx.wait_for(|s| *s) => break,
        }
    }
    drop(updates);
    drop(served);
    let _ = shutdown_rx.wait_for(|s| *s).await;
    source.stop().await;
    haproxy.shutdown().await;
    for task in [proxy_task, https_task].into_iter().flatten() {
        let _ = task.await;
    }
    let _ = admin_task.await;
    Ok(())
}

/// haproxy needs a fixed port that is free now (it binds it itself, later).
async fn check_haproxy_listen(what: &'static str, addr: SocketAddr) -> Result<(), AppError> {
    if addr.port() == 0 {
        let reason = "port 0 cannot be handed to haproxy: choose a port".to_owned();
        return Err(AppError::Listen { what, addr, reason });
    }
    drop(bind(what, addr).await?);
    Ok(())
}

/// Wakes when any provider's status may have changed.
fn status_changes(providers: &Registry) -> Arc<tokio::sync::Notify> {
    let notify = Arc::new(tokio::sync::Notify::new());
    for mut rx in providers.subscribe() {
        let notify = notify.clone();
        tokio::spawn(async move {
            while rx.changed().await.is_ok() {
                notify.notify_one();
            }
        });
    }
    notify
}

/// Status entries for `--publish-service`'s addresses.
fn status_addresses_of(addresses: &[String]) -> Vec<portico_admin::LoadBalancerAddress> {
    addresses
        .iter()
        .flat_map(|a| status_addresses(Some(a)))
        .collect()
}

fn publish_address(
    settings: &Settings,
    http: SocketAddr,
) -> Vec<portico_admin::LoadBalancerAddress> {
    match &settings.publish_address {
        Some(a) => status_addresses(Some(a)),
        None if http.ip().is_unspecified() => {
            tracing::warn!(
                "--http-listen is a wildcard address: set --publish-address to fill Ingress status"
            );
            vec![]
        }
        None => status_addresses(Some(&http.ip().to_string())),
    }
}

/// The steps from a source update to what the proxy and the admin API serve.
struct Pipeline<'a> {
    settings: &'a Settings,
    providers: &'a Registry,
    admin: &'a Admin,
    metrics: &'a AppMetrics,
    publish: &'a [portico_admin::LoadBalancerAddress],
    certificates: &'a CertificateStage,
    /// Where superseded loads go back to, to be freed on the thread that allocated them, and
    /// where reports for the Kubernetes API go.
    source: &'a Source,
}

/// What is served now, kept so that the next update can be applied incrementally.
struct Served {
    loaded: Arc<Loaded>,
    /// The translation, without its model (which is `model`).
    translation: Translation,
    model: Arc<Model>,
    /// What the translation prepared, for the next one to reuse.
    memo: Memo,
}

impl Pipeline<'_> {
    fn apply(&self, loaded: Arc<Loaded>, previous: Option<Served>) -> Served {
        let (translation, model, memo, generation) = match previous {
            Some(previous) => match self.endpoints_only(&previous, &loaded) {
                Some((model, generation)) => {
                    self.source.retire(previous.loaded);
                    (previous.translation, model, previous.memo, generation)
                }
                None => self.translate(&loaded, Some(previous)),
            },
            None => self.translate(&loaded, None),
        };
        let mut snapshot = build_snapshot(
            generation,
            &loaded.diagnostics,
            &translation,
            model.clone(),
            self.publish,
        );
        snapshot.ready = self.providers.ready();
        snapshot.diagnostics.extend(self.providers.diagnostics());
        self.source.report(&loaded.objects, &snapshot, self.publish);
        let all_diagnostics = || loaded.diagnostics.iter().chain(&translation.diagnostics);
        self.metrics.observe(&loaded.objects, all_diagnostics());
        for d in all_diagnostics() {
            tracing::debug!(diagnostic = %d, "diagnostic");
        }
        tracing::info!(
            generation,
            ingresses = loaded.objects.ingresses.len(),
            diagnostics = loaded.diagnostics.len() + translation.diagnostics.len(),
            "configuration applied"
        );
        self.admin.publish(snapshot);
        Served {
            loaded,
            translation,
            model,
            memo,
        }
    }

    /// The general path: translate (reusing what `previous` prepared where its inputs did not
    /// change), compile and swap the proxy's route table.
    fn translate(
        &self,
        loaded: &Loaded,
        previous: Option<Served>,
    ) -> (Translation, Arc<Model>, Memo, u64) {
        let config = &self.settings.translate;
        let (mut translation, memo) = match previous {
            Some(Served {
                loaded: previous_loaded,
                model: previous_model,
                mut memo,
                ..
            }) => {
                let previous = Previous {
                    objects: &previous_loaded.objects,
                    model: &previous_model,
                };
                let translation =
                    translate_incremental(&loaded.objects, config, Some(previous), &mut memo);
                self.source.retire(previous_loaded);
                (translation, memo)
            }
            None => {
                let mut memo = Memo::default();
                let translation = translate_incremental(&loaded.objects, config, None, &mut memo);
                (translation, memo)
            }
        };
        let objects = &loaded.objects;
        let vips = portico_translate::assign_vips(&mut translation.model, objects, config);
        translation.diagnostics.extend(vips);
        let model = Arc::new(std::mem::take(&mut translation.model));
        let certificates = (self.certificates).apply(objects, &mut translation, config);
        let applied = self.providers.apply(&model, &certificates);
        translation.diagnostics.extend(applied.diagnostics);
        let generation = applied.generation;
        (translation, model, memo, generation)
    }

    /// The fast path when only endpoints changed: the touched pools get their new members in
    /// the model and in the proxy, without a translation or a route-table compile.
    fn endpoints_only(&self, previous: &Served, loaded: &Loaded) -> Option<(Arc<Model>, u64)> {
        let services =
            portico_translate::endpoint_only_change(&previous.loaded.objects, &loaded.objects)?;
        let mut model = Model::clone(&previous.model);
        let changed: HashSet<_> =
            portico_translate::refresh_members(&mut model, &loaded.objects, &services)
                .into_iter()
                .collect();
        let generation = self.providers.update_members(&model, &changed);
        tracing::debug!(
            pools = changed.len(),
            "endpoints updated without a translation"
        );
        Some((Arc::new(model), generation))
    }
}
