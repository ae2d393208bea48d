//! OpenTelemetry tracing of the proxy's requests (`--otlp-endpoint`, docs/observability.md):
//! W3C trace context read from the client and written for the member, and a span per request
//! exported over OTLP/HTTP (protobuf) in batches.
//!
//! The `traceparent` field is read and written by [`context`], a small pure parser that
//! allocates nothing; the sampling decision (parent-based: a sampled parent is honoured, an
//! unsampled one too, else the trace id's ratio), the ids, the span and its export are the
//! OpenTelemetry SDK's. `tracestate` is left as the client sent it: the proxy adds no entry.
//! Both request paths call [`Tracing::begin`]; the span ends with the access log line
//! ([`crate::access`]), which knows the status, pool, member and tries.

pub(crate) mod context;

use opentelemetry::trace::{
    SpanContext, SpanId, SpanKind, TraceContextExt as _, TraceFlags, TraceId, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::span_processor_with_async_runtime::BatchSpanProcessor;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, Span, Tracer};
use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

pub(crate) use context::LEN;

/// The process's tracer: the first proxy's settings (they are the process's flags).
static PROCESS: OnceLock<Option<Tracing>> = OnceLock::new();

/// The tracer of the process, started with `settings` on first use (on the tokio runtime,
/// which runs its batch exporter); none when `--otlp-endpoint` is absent.
pub(crate) fn process(settings: &portico_model::Tracing) -> Option<&'static Tracing> {
    PROCESS
        .get_or_init(|| {
            let endpoint = settings.endpoint?;
            match Tracing::exporting(endpoint, settings.ratio()) {
                Ok(tracing) => Some(tracing),
                Err(error) => {
                    tracing::error!(%endpoint, %error, "--otlp-endpoint: tracing is off");
                    None
                }
            }
        })
        .as_ref()
}

/// A tracer with its sampler.
pub struct Tracing {
    /// Kept for the tracer's processors (never shut down: the last batch may be lost at exit).
    _provider: SdkTracerProvider,
    tracer: Tracer,
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tracing")
    }
}

impl Tracing {
    /// Spans sampled by `ratio` (of new traces; parents decide for theirs), exported to
    /// `endpoint` (the full URL, as `http://collector:4318/v1/traces`) in batches by a task
    /// on the current tokio runtime. A collector that is down or slow costs spans (the
    /// exporter's queue is bounded, the rest dropped), never the requests' time.
    pub fn exporting(endpoint: &str, ratio: f64) -> Result<Tracing, String> {
        use opentelemetry_otlp::{Protocol, WithExportConfig as _};
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .with_timeout(Duration::from_secs(5))
            .build()
            .map_err(|e| e.to_string())?;
        // A batch each second (or each 512 spans), at most 2048 queued: more are dropped.
        let config = opentelemetry_sdk::trace::BatchConfigBuilder::default()
            .with_scheduled_delay(Duration::from_secs(1))
            .build();
        let batches = BatchSpanProcessor::builder(exporter, opentelemetry_sdk::runtime::Tokio)
            .with_batch_config(config);
        let builder = SdkTracerProvider::builder().with_span_processor(batches.build());
        Ok(Tracing::with(builder, ratio))
    }

    /// The tracer of `builder`'s provider, sampling new traces by `ratio`.
    fn with(builder: opentelemetry_sdk::trace::TracerProviderBuilder, ratio: f64) -> Tracing {
        let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio)));
        let resource = opentelemetry_sdk::Resource::builder()
            .with_service_name("portico")
            .build();
        let provider = builder
            .with_sampler(sampler)
            .with_resource(resource)
            .build();
        let tracer = opentelemetry::trace::TracerProvider::tracer(&provider, "portico");
        Tracing {
            _provider: provider,
            tracer,
        }
    }

    /// The span of a request whose `traceparent` field is `parent` (the first one, if any):
    /// a child of it when it is valid, else the root of a new trace.
    pub(crate) fn begin(&self, parent: Option<&[u8]>, asked: &Asked<'_>) -> Traced {
        let parent = parent.and_then(context::parse);
        let cx = match parent {
            Some(p) => Context::new().with_remote_span_context(SpanContext::new(
                TraceId::from_bytes(p.trace_id),
                SpanId::from_bytes(p.span_id),
                if p.sampled {
                    TraceFlags::SAMPLED
                } else {
                    TraceFlags::default()
                },
                true,
                TraceState::NONE,
            )),
            None => Context::new(),
        };
        let name = match asked.method {
            m @ ("GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "PATCH" | "OPTIONS") => {
                Cow::Borrowed(static_method(m))
            }
            _ => Cow::Borrowed("HTTP"),
        };
        let mut span = self
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Server)
            .start_with_context(&self.tracer, &cx);
        let own = opentelemetry::trace::Span::span_context(&span);
        let traceparent = context::format(
            own.trace_id().to_bytes(),
            own.span_id().to_bytes(),
            own.is_sampled(),
        );
        if !opentelemetry::trace::Span::is_recording(&span) {
            return Traced {
                traceparent,
                span: None,
            };
        }
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        let attributes = [
            KeyValue::new("http.request.method", asked.method.to_owned()),
            KeyValue::new("url.path", text(asked.path)),
            KeyValue::new("url.scheme", asked.scheme),
            KeyValue::new("server.address", text(asked.host)),
            KeyValue::new("client.address", text(asked.client)),
            KeyValue::new("network.peer.address", asked.peer.to_string()),
        ];
        opentelemetry::trace::Span::set_attributes(&mut span, attributes);
        Traced {
            traceparent,
            span: Some(Box::new(Recording {
                span,
                tries: 0,
                upstream: None,
            })),
        }
    }
}

/// The method's name as a `'static` string, for the standard ones.
fn static_method(method: &str) -> &'static str {
    match method {
        "GET" => "GET",
        "HEAD" => "HEAD",
        "POST" => "POST",
        "PUT" => "PUT",
        "DELETE" => "DELETE",
        "PATCH" => "PATCH",
        _ => "OPTIONS",
    }
}

/// What a request's span starts with.
pub(crate) struct Asked<'a> {
    pub(crate) method: &'a str,
    pub(crate) path: &'a [u8],
    pub(crate) host: &'a [u8],
    /// `http` or `https`.
    pub(crate) scheme: &'static str,
    /// The client's address (a trusted proxy's `X-Forwarded-For` may name it).
    pub(crate) client: &'a [u8],
    pub(crate) peer: std::net::IpAddr,
}

/// A request's trace: the `traceparent` the member gets, and the span when it is sampled.
pub(crate) struct Traced {
    pub(crate) traceparent: [u8; LEN],
    pub(crate) span: Option<Box<Recording>>,
}

impl Traced {
    /// The trace id, as the access log shows it.
    pub(crate) fn trace_id(&self) -> &[u8] {
        context::trace_id_text(&self.traceparent)
    }
}

/// A sampled request's span, until its response is done.
pub(crate) struct Recording {
    span: Span,
    tries: u32,
    upstream: Option<SocketAddr>,
}

impl Recording {
    /// A try went to `member`.
    pub(crate) fn tried(&mut self, member: SocketAddr) {
        self.tries += 1;
        self.upstream = Some(member);
    }

    /// Ends the span with what the access log line ends with.
    pub(crate) fn end(mut self, status: u16, pool: Option<(&str, &str)>) {
        use opentelemetry::trace::Span as _;
        let mut attributes = Vec::with_capacity(6);
        attributes.push(KeyValue::new(
            "http.response.status_code",
            i64::from(status),
        ));
        if let Some((load_balancer, pool)) = pool {
            attributes.push(KeyValue::new(
                "portico.load_balancer",
                load_balancer.to_owned(),
            ));
            attributes.push(KeyValue::new("portico.pool", pool.to_owned()));
        }
        if let Some(member) = self.upstream {
            attributes.push(KeyValue::new("portico.member", member.to_string()));
            let retries = i64::from(self.tries.saturating_sub(1));
            attributes.push(KeyValue::new("portico.retries", retries));
        }
        self.span.set_attributes(attributes);
        if status >= 500 {
            let status = opentelemetry::trace::Status::error("");
            self.span.set_status(status);
        }
        self.span.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracing(ratio: f64) -> Tracing {
        Tracing::with(SdkTracerProvider::builder(), ratio)
    }

    fn asked() -> Asked<'static> {
        Asked {
            method: "GET",
            path: b"/",
            host: b"web.test",
            scheme: "http",
            client: b"10.0.0.9",
            peer: "10.0.0.9".parse().expect("address"),
        }
    }

    const PARENT: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const UNSAMPLED: &[u8] = b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00";

    #[test]
    fn a_sampled_parent_is_honoured_whatever_the_ratio() {
        let traced = tracing(0.0).begin(Some(PARENT), &asked());
        assert!(traced.span.is_some());
        let own = context::parse(&traced.traceparent).expect("valid");
        assert_eq!(
            own.trace_id,
            context::parse(PARENT).expect("valid").trace_id
        );
        assert_ne!(&own.span_id[..], &PARENT[36..52]);
        assert!(own.sampled);
    }

    #[test]
    fn an_unsampled_parent_gives_no_span_but_its_trace_goes_on() {
        let traced = tracing(1.0).begin(Some(UNSAMPLED), &asked());
        assert!(traced.span.is_none());
        assert_eq!(traced.trace_id(), &UNSAMPLED[3..35]);
        assert!(!context::parse(&traced.traceparent).expect("valid").sampled);
    }

    #[test]
    fn without_a_parent_the_ratio_decides() {
        let all = tracing(1.0);
        let none = tracing(0.0);
        for _ in 0..100 {
            assert!(all.begin(None, &asked()).span.is_some());
            let traced = none.begin(None, &asked());
            assert!(traced.span.is_none());
            assert_ne!(traced.trace_id(), &[b'0'; 32][..]);
        }
        let some = tracing(0.25);
        let sampled = (0..4000)
            .filter(|_| some.begin(Some(b"garbage"), &asked()).span.is_some())
            .count();
        assert!((800..1200).contains(&sampled), "{sampled} of 4000 at 25 %");
    }
}
