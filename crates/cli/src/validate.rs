use portico_app::offline::{Config, ReadLimits};
use std::path::PathBuf;
use std::process::ExitCode;

/// `portico validate`: the same load, translation and haproxy plan as `run` (with its default
/// listeners), printed instead of served.
pub fn run(files: &[PathBuf], limits: ReadLimits, config: &Config) -> anyhow::Result<ExitCode> {
    let listeners = (
        crate::DEFAULT_HTTP_LISTEN.parse()?,
        crate::DEFAULT_HTTPS_LISTEN.parse()?,
    );
    let validation = portico_app::offline::validate(files, limits, config, listeners);
    for d in &validation.diagnostics {
        println!("{d}");
    }
    println!("{}", validation.summary);
    Ok(if validation.errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
