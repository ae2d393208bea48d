use portico_model::Severity;
use std::path::PathBuf;
use std::process::ExitCode;

/// `portico validate`: the same load, translation and haproxy plan as `run` (with its default
/// listeners), printed instead of served.
pub fn run(files: &[PathBuf], config: &portico_translate::Config) -> anyhow::Result<ExitCode> {
    let loaded = portico_source_file::load(files);
    let mut translation = portico_translate::translate(&loaded.objects, config);
    let none = portico_translate::Certificates::default();
    let certificates =
        portico_translate::certificates(&loaded.objects, &translation, config, &none);
    let default_binds = (config.default_provider == portico_provider_haproxy::PROVIDER).then_some(
        portico_provider_haproxy::Binds {
            http: Some(crate::DEFAULT_HTTP_LISTEN.parse()?),
            https: Some(crate::DEFAULT_HTTPS_LISTEN.parse()?),
        },
    );
    let settings = portico_provider_haproxy::PlanSettings {
        // Only named in messages: validate writes nothing.
        root: PathBuf::from("state/loadbalancer/haproxy"),
        default_binds,
        default_class: config.ingress_class.clone(),
        limits: portico_model::Limits::default(),
    };
    let (_, planned) = crate::render::plan_haproxy(
        &mut translation,
        &loaded.objects,
        config,
        &certificates,
        &settings,
    );
    let mut all: Vec<_> = loaded
        .diagnostics
        .iter()
        .chain(&translation.diagnostics)
        .chain(&certificates.diagnostics)
        .chain(&planned)
        .collect();
    all.sort();
    all.dedup();
    for d in &all {
        println!("{d}");
    }
    let errors = all.iter().filter(|d| d.severity == Severity::Error).count();
    let served = translation.ingresses.iter().filter(|i| i.served).count();
    println!(
        "{} Ingresses ({} served by this controller), {} errors, {} warnings",
        translation.ingresses.len(),
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
