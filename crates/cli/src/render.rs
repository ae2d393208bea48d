use crate::RenderArgs;
use std::process::ExitCode;

/// `portico render`: the same load, translation and certificates as `run`, then the haproxy
/// configuration of every load balancer of provider haproxy, printed instead of written (the
/// files it names are written, in the state directory, which it locks as `run` does).
pub fn run(args: &RenderArgs) -> anyhow::Result<ExitCode> {
    let node = args.haproxy.state.settings()?;
    let config = crate::translate_config(&args.class, &args.tls);
    let listeners = (args.http_listen, args.https_listen);
    let rendered = portico_app::offline::render(
        &args.files,
        args.manifests.limits(),
        &config,
        &node,
        listeners,
    )?;
    for d in &rendered.diagnostics {
        eprintln!("{d}");
    }
    if rendered.configs.is_empty() {
        println!(
            "# no load balancer has provider haproxy (annotate an IngressClass with portico.dev/provider: haproxy, or pass --provider haproxy)"
        );
    }
    for (path, config) in &rendered.configs {
        println!("# {}\n{}", path.display(), config);
    }
    Ok(ExitCode::SUCCESS)
}
