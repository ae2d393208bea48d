use portico_model::Severity;
use std::path::PathBuf;
use std::process::ExitCode;

/// `portico validate`: the same load and translation as `run`, printed instead of served.
pub fn run(files: &[PathBuf], config: &portico_translate::Config) -> anyhow::Result<ExitCode> {
    let loaded = portico_source_file::load(files);
    let translation = portico_translate::translate(&loaded.objects, config);
    let none = portico_translate::Certificates::default();
    let certificates =
        portico_translate::certificates(&loaded.objects, &translation, config, &none);
    let mut all: Vec<_> = loaded
        .diagnostics
        .iter()
        .chain(&translation.diagnostics)
        .chain(&certificates.diagnostics)
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
