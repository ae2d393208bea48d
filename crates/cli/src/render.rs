use crate::RenderArgs;
use portico_provider_haproxy::{Binds, plan};
use std::process::ExitCode;
use std::sync::Arc;

/// `portico render`: the same load, translation and certificates as `run`, then the haproxy
/// configuration of every load balancer of provider haproxy, printed instead of written.
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let config = crate::translate_config(&args.class, &args.tls);
    let loaded = portico_source_file::load(&args.files);
    let mut translation = portico_translate::translate(&loaded.objects, &config);
    let mut diagnostics =
        portico_translate::assign_vips(&mut translation.model, &loaded.objects, &config);
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
    );
    // The fallback certificate's content is not printed: none is made.
    let (planned, found) = plan(
        &translation.model,
        &certificates.material,
        &settings,
        &Arc::new(Vec::new()),
    );
    diagnostics.extend(found);
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
