//! `portico migrate`: what Portico makes of Ingresses written for ingress-nginx, read from
//! manifests or the Kubernetes API, and of the ingress-nginx controller's ConfigMap. The
//! report is `portico_translate::migrate`'s; this prints it and sets the exit code.

use anyhow::Context;
use clap::{Args, ValueEnum};
use portico_translate::migrate::{KeyReport, Report, report};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct MigrateArgs {
    /// Manifest file or directory (YAML or JSON, multi-document; directories recursively).
    #[arg(short = 'f', long = "filename", required_unless_present = "kubernetes")]
    files: Vec<PathBuf>,
    #[command(flatten)]
    manifests: super::ManifestArgs,
    #[command(flatten)]
    kube: super::KubeSourceArgs,
    /// The IngressClass the Ingresses to migrate name (usually `nginx`), and the provider
    /// that would serve them.
    #[command(flatten)]
    class: super::ClassArgs,
    /// The ingress-nginx controller's ConfigMap (a YAML or JSON manifest): each key of its
    /// `data` is reported with the flag or annotation that serves it, or why none does.
    #[arg(long, value_name = "FILE")]
    nginx_configmap: Option<PathBuf>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
}

/// How long `--kubernetes` waits for the first complete list of every kind.
const LIST_WAIT: Duration = Duration::from_secs(60);

pub fn run(args: &MigrateArgs) -> anyhow::Result<ExitCode> {
    let tls = super::TlsArgs {
        default_certificate: None,
    };
    let config = super::translate_config(&args.class, &tls);
    let loaded = if args.kube.kubernetes {
        let rt = super::runtime(1)?;
        let loaded = rt.block_on(portico_app::load_kubernetes_once(
            args.kube.kubeconfig.as_deref(),
            args.kube.namespace.clone(),
            &config,
            LIST_WAIT,
        ))?;
        loaded.context("the Kubernetes API did not list every kind within a minute")?
    } else {
        Arc::new(portico_source_file::load(
            &args.files,
            args.manifests.limits(),
        ))
    };
    let configmap = args
        .nginx_configmap
        .as_deref()
        .map(configmap_data)
        .transpose()?;
    let compiled = portico_app::compile::compile_once(loaded.clone(), &config);
    let report = report(
        &loaded.objects,
        &compiled.translation,
        &config.default_provider,
        configmap.as_ref(),
    );
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", text(&report)),
    }
    for d in &loaded.diagnostics {
        eprintln!("{d}");
    }
    Ok(if report.summary.all_served() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The `data` of the first ConfigMap in `path`.
fn configmap_data(path: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    let name = path.display();
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--nginx-configmap {name}"))?;
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("--nginx-configmap {name}: not YAML or JSON"))?;
    let configmap = docs
        .into_iter()
        .find(|d| d["kind"] == "ConfigMap")
        .with_context(|| format!("--nginx-configmap {name}: no ConfigMap in the file"))?;
    let data = configmap.get("data").cloned().unwrap_or_default();
    let data = if data.is_null() {
        serde_json::json!({})
    } else {
        data
    };
    serde_json::from_value(data)
        .with_context(|| format!("--nginx-configmap {name}: data must map keys to strings"))
}

/// The report as text: per Ingress, a line per annotation; the ConfigMap; the summary.
fn text(report: &Report) -> String {
    let mut out = String::new();
    for ingress in &report.ingresses {
        out.push_str(&format!(
            "Ingress {}/{} (provider {})\n",
            ingress.namespace, ingress.name, ingress.provider
        ));
        if let Some(why) = &ingress.not_served {
            out.push_str(&format!("  not served: {why}\n"));
        }
        if ingress.annotations.is_empty() {
            out.push_str("  no ingress-nginx or Portico annotations\n");
        }
        ingress.annotations.iter().for_each(|k| line(&mut out, k));
    }
    if let Some(keys) = &report.configmap {
        out.push_str("ConfigMap (ingress-nginx controller)\n");
        keys.iter().for_each(|k| line(&mut out, k));
    }
    let s = &report.summary;
    out.push_str(&format!(
        "{} Ingresses ({} not served): {} served, {} served differently, {} ignored, {} refused\n",
        s.ingresses, s.not_served, s.served, s.served_differently, s.ignored, s.refused
    ));
    out
}

fn line(out: &mut String, key: &KeyReport) {
    let escaped = portico_model::Escaped(&key.key);
    out.push_str(&format!("  {:<19} {escaped}", key.outcome));
    if !key.detail.is_empty() {
        out.push_str(&format!(": {}", key.detail));
    }
    out.push('\n');
}
