use portico_model::Severity;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// `portico validate`: the same load, translation and haproxy plan as `run` (with its default
/// listeners), printed instead of served.
pub fn run(
    files: &[PathBuf],
    limits: portico_source_file::ReadLimits,
    config: &portico_translate::Config,
) -> anyhow::Result<ExitCode> {
    let loaded = std::sync::Arc::new(portico_source_file::load(files, limits));
    let compiled = portico_app::compile::compile_once(loaded, config);
    let default_binds = (config.default_provider == portico_provider_haproxy::PROVIDER).then_some(
        portico_provider_haproxy::Binds {
            http: Some(crate::DEFAULT_HTTP_LISTEN.parse()?),
            https: Some(crate::DEFAULT_HTTPS_LISTEN.parse()?),
            transparent: false,
            floating: None,
        },
    );
    let settings = portico_provider_haproxy::PlanSettings {
        // Only named in messages: validate writes nothing.
        root: PathBuf::from("state/loadbalancer/haproxy"),
        default_binds,
        default_class: config.ingress_class.clone(),
        limits: portico_model::Limits::default(),
        tcp: Default::default(),
        access_log: None,
        // What `run` would be given: this process's limit.
        descriptors: portico_provider_haproxy::descriptor_limit(),
    };
    let (_, planned) =
        crate::render::plan_haproxy(&compiled.desired, &settings, &Arc::new(Vec::new()));
    let mut all: Vec<_> = compiled.diagnostics().chain(&planned).collect();
    all.sort();
    all.dedup();
    for d in &all {
        println!("{d}");
    }
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let ingresses = &compiled.translation.ingresses;
    let served = ingresses.iter().filter(|i| i.served).count();
    let objects = &compiled.loaded.objects;
    let verdicts = &compiled.translation.gateways;
    let gateway_api = if objects.gateways.is_empty() && objects.http_routes.is_empty() {
        String::new()
    } else {
        format!(
            "{} Gateways ({} of this controller), {} HTTPRoutes ({} with a parent of it), ",
            objects.gateways.len(),
            verdicts.gateways.len(),
            objects.http_routes.len(),
            verdicts.routes.len(),
        )
    };
    println!(
        "{} Ingresses ({} served by this controller), {gateway_api}{} errors, {} warnings",
        ingresses.len(),
        served,
        errors,
        all.len() - errors
    );
    Ok(if errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
