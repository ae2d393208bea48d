//! `portico migrate`: what Portico makes of Ingresses written for ingress-nginx, read from
//! manifests or the Kubernetes API, and of the ingress-nginx controller's ConfigMap. The
//! report is `portico_app::offline::migrate`'s; this prints it and sets the exit code.

use anyhow::Context;
use clap::{Args, ValueEnum};
use portico_app::offline::migrate::{GatewayOptions, KeyReport, Report, report, to_gateway_api};
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
    /// What to print: the annotation report (default), or with `gateway-api` the Gateway API
    /// objects that route as the served Ingresses do (a GatewayClass named by
    /// --gateway-controller-name, a Gateway per IngressClass, ReferenceGrants for its TLS
    /// Secrets, an HTTPRoute per Ingress host); what they cannot express goes to stderr, per
    /// Ingress, and the exit code is 1.
    #[arg(long, value_enum, value_name = "gateway-api")]
    to: Option<Target>,
    /// With --to gateway-api: the namespace of the Gateways.
    #[arg(long, value_name = "NAMESPACE", default_value = "default")]
    gateway_namespace: String,
    /// With --to gateway-api: the GatewayClass's name.
    #[arg(long, value_name = "NAME", default_value = "portico")]
    gateway_class: String,
    /// With --to gateway-api: the port of the Gateways' HTTP listener.
    #[arg(long, value_name = "PORT", default_value_t = 80)]
    http_port: u16,
    /// With --to gateway-api: the port of the Gateways' HTTPS listeners.
    #[arg(long, value_name = "PORT", default_value_t = 443)]
    https_port: u16,
    /// Output format: the report as text or JSON; with --to gateway-api, YAML documents
    /// (`text`, `yaml`) or a v1 List (`json`).
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    output: Format,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Yaml,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Target {
    GatewayApi,
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
        let loaded = rt.block_on(portico_app::offline::load_kubernetes_once(
            args.kube.kubeconfig.as_deref(),
            args.kube.namespace.clone(),
            &config,
            LIST_WAIT,
        ))?;
        loaded.context("the Kubernetes API did not list every kind within a minute")?
    } else {
        Arc::new(portico_app::offline::load(
            &args.files,
            args.manifests.limits(),
        ))
    };
    let configmap = args
        .nginx_configmap
        .as_deref()
        .map(configmap_data)
        .transpose()?;
    let compiled = portico_app::offline::compile_once(loaded.clone(), &config);
    if args.to.is_some() {
        let options = GatewayOptions {
            controller_name: args.class.gateway_controller_name.clone(),
            class_name: args.gateway_class.clone(),
            namespace: args.gateway_namespace.clone(),
            http_port: args.http_port,
            https_port: args.https_port,
        };
        let converted = to_gateway_api(&loaded.objects, &compiled.translation, &options);
        print_objects(&converted.objects, args.output)?;
        for note in &converted.notes {
            let escaped = portico_app::offline::Escaped(&note.message);
            eprintln!("Ingress {}/{}: {escaped}", note.namespace, note.name);
        }
        return Ok(if converted.notes.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        });
    }
    let report = report(
        &loaded.objects,
        &compiled.translation,
        &config.default_provider,
        configmap.as_ref(),
    );
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", text(&report)),
        Format::Yaml => print!("{}", serde_saphyr::to_string(&report)?),
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

/// `--to gateway-api`'s objects: YAML documents, or a v1 List as JSON.
fn print_objects(objects: &[serde_json::Value], format: Format) -> anyhow::Result<()> {
    if format == Format::Json {
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": objects});
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    for object in objects {
        print!(
            "---\n{}",
            serde_saphyr::to_string(object).context("writing YAML")?
        );
    }
    Ok(())
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
    let escaped = portico_app::offline::Escaped(&key.key);
    out.push_str(&format!("  {:<19} {escaped}", key.outcome));
    if !key.detail.is_empty() {
        out.push_str(&format!(": {}", key.detail));
    }
    out.push('\n');
}
