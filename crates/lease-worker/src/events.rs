//! Every event of a runtime process as one JSON object per line on stdout: the dispatcher's
//! tracing events (claim, renew, lost, acknowledge, release) with their delivery span's
//! `execution_id` and `token`, and the workflow's own events (target `worker`).
//!
//! An orchestrator reads these lines to draw the timeline and to check, from the log of
//! claims, that no execution ever had two live leases.

use std::fmt;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber, span};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// The target of the workflow's own events.
pub const TARGET: &str = "worker";

/// Milliseconds since the Unix epoch on this machine's clock.
pub fn wall_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

#[derive(Default)]
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().to_owned(), Value::String(format!("{value:?}")));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0
            .insert(field.name().to_owned(), Value::String(value.to_owned()));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), Value::from(value));
    }
}

/// The layer that prints JSON lines.
struct JsonLines {
    worker: String,
    pid: u32,
}

impl<S> Layer<S> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &span::Attributes<'_>, id: &span::Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(fields);
        }
    }

    fn on_record(&self, id: &span::Id, values: &span::Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(fields) = span.extensions_mut().get_mut::<Fields>()
        {
            values.record(fields);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut out = Map::new();
        out.insert("ts_ms".into(), Value::from(wall_ms()));
        out.insert("worker".into(), Value::from(self.worker.clone()));
        out.insert("pid".into(), Value::from(self.pid));
        out.insert(
            "level".into(),
            Value::from(event.metadata().level().as_str()),
        );
        out.insert("target".into(), Value::from(event.metadata().target()));
        if let Some(scope) = ctx.event_scope(event) {
            for span in scope.from_root() {
                if let Some(fields) = span.extensions().get::<Fields>() {
                    for (k, v) in &fields.0 {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        for (k, v) in fields.0 {
            let k = if k == "message" { "msg".to_owned() } else { k };
            out.insert(k, v);
        }
        let mut stdout = std::io::stdout().lock();
        // A closed stdout (orchestrator gone) must not stop the worker: ignore the error.
        let _ = writeln!(stdout, "{}", Value::Object(out));
        let _ = stdout.flush();
    }
}

/// Installs the JSON-lines output for the process named `worker`: dispatcher events at
/// debug (renewals are debug), workflow events at info, everything else at warn.
pub fn install(worker: &str) {
    let filter = Targets::new()
        .with_default(Level::WARN)
        .with_target("lease_runtime", Level::DEBUG)
        .with_target(TARGET, Level::INFO);
    let layer = JsonLines {
        worker: worker.to_owned(),
        pid: std::process::id(),
    };
    // A global filter, not a per-layer one: with per-layer filtering, spans created right
    // after a filtered-out event of a driver (sqlx logs every query) lost their fields.
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(layer)
        .try_init();
}
