use crate::RenderArgs;
use portico_model::Diagnostic;
use portico_provider_haproxy::{Binds, PlanSettings, Planned, plan};
use portico_translate::{Certificates, Objects, Translation};
use std::process::ExitCode;
use std::sync::Arc;

/// What `run` does after translating, up to the haproxy configurations: VIPs assigned to the
/// model, then every load balancer of provider haproxy planned and rendered. Returns the
/// plans and the diagnostics of both steps.
pub(crate) fn plan_haproxy(
    translation: &mut Translation,
    objects: &Objects,
    config: &portico_translate::Config,
    certificates: &Certificates,
    settings: &PlanSettings,
) -> (Vec<Planned>, Vec<Diagnostic>) {
    let mut diagnostics = portico_translate::assign_vips(&mut translation.model, objects, config);
    // The fallback certificate's content is not needed to plan: none is made.
    let fallback = Arc::new(Vec::new());
    let (planned, found) = plan(
        &translation.model,
        &certificates.material,
        settings,
        &fallback,
    );
    diagnostics.extend(found);
    (planned, diagnostics)
}

/// `portico render`: the same load, translation and certificates as `run`, then the haproxy
/// configuration of every load balancer of provider haproxy, printed instead of written.
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let config = crate::translate_config(&args.class, &args.tls);
    let loaded = portico_source_file::load(&args.files);
    let mut translation = portico_translate::translate(&loaded.objects, &config);
    let none = portico_translate::Certificates::default();
    let certificates =
        portico_translate::certificates(&loaded.objects, &translation, &config, &none);
    let default_binds =
        (config.default_provider == portico_provider_haproxy::PROVIDER).then_some(Binds {
            http: Some(args.http_listen),
            https: Some(args.https_listen),
        });
    let settings = portico_app::haproxy_plan(
        &args.haproxy.settings()?,
        default_binds,
        &config.ingress_class,
        portico_model::Limits::default(),
    );
    let (planned, mut diagnostics) = plan_haproxy(
        &mut translation,
        &loaded.objects,
        &config,
        &certificates,
        &settings,
    );
    diagnostics.extend(certificates.diagnostics);
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
        println!(
            "# {}\n{}",
            p.dir.join(portico_provider_haproxy::CONFIG_FILE).display(),
            p.config()
        );
    }
    Ok(ExitCode::SUCCESS)
}
