use crate::RenderArgs;
use anyhow::Context as _;
use portico_model::Diagnostic;
use portico_provider_haproxy::{Binds, PlanSettings, Planned, plan};
use std::process::ExitCode;
use std::sync::Arc;

/// Every load balancer of provider haproxy in the compiled desired state, planned and
/// rendered as `run` would. Returns the plans and the problems found.
pub(crate) fn plan_haproxy(
    desired: &portico_store::Desired,
    settings: &PlanSettings,
    fallback: &Arc<Vec<u8>>,
) -> (Vec<Planned>, Vec<Diagnostic>) {
    let (model, ca) = (&desired.model, &desired.ca_bundles);
    plan(
        model,
        &desired.certificates,
        ca,
        &desired.credentials,
        settings,
        fallback,
    )
}

/// `portico render`: the same load, translation and certificates as `run`, then the haproxy
/// configuration of every load balancer of provider haproxy, printed instead of written (the
/// files it names are written, in the state directory, which it locks as `run` does).
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let state_dir = args.haproxy.settings()?.state_dir;
    portico_statedir::ensure_private_dir(&state_dir).context("--state-dir")?;
    let _lock = portico_statedir::lock(&state_dir).context("--state-dir")?;
    let config = crate::translate_config(&args.class, &args.tls);
    let loaded = Arc::new(portico_source_file::load(
        &args.files,
        args.manifests.limits(),
    ));
    let compiled = portico_app::compile::compile_once(loaded, &config);
    let default_binds =
        (config.default_provider == portico_provider_haproxy::PROVIDER).then_some(Binds {
            http: Some(args.http_listen),
            https: Some(args.https_listen),
            transparent: false,
            floating: None,
        });
    let settings = portico_app::haproxy_plan(
        &args.haproxy.settings()?,
        default_binds,
        &config.ingress_class,
        portico_model::Limits::default(),
        // As `run` with its default access log, but without the process id in the name.
        Some(args.haproxy.settings()?.state_dir.join("access-log.sock")),
    );
    // The certificate served when no other fits, as `run` makes it.
    let fallback = portico_tls::self_signed(&["portico.invalid"])
        .map_err(|e| anyhow::anyhow!("making the fallback certificate: {e}"))?;
    let fallback = Arc::new(fallback.pem());
    let (planned, mut diagnostics) = plan_haproxy(&compiled.desired, &settings, &fallback);
    diagnostics.extend(compiled.diagnostics().cloned());
    diagnostics.sort();
    diagnostics.dedup();
    for d in &diagnostics {
        eprintln!("{d}");
    }
    if planned.is_empty() {
        println!(
            "# no load balancer has provider haproxy (annotate an IngressClass with portico.dev/provider: haproxy, or pass --provider haproxy)"
        );
    }
    for p in &planned {
        // What the configuration names must exist for it to pass `haproxy -c` as printed.
        p.write_files()
            .map_err(|e| anyhow::anyhow!("writing the files of {}: {e}", p.dir.display()))?;
        println!(
            "# {}\n{}",
            p.dir.join(portico_provider_haproxy::CONFIG_FILE).display(),
            p.printable_config()
        );
    }
    Ok(ExitCode::SUCCESS)
}
