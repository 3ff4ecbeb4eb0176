//! Feature `otel`: [`TraceContext`] to and from OpenTelemetry, through the `tracing`
//! bridge (`tracing-opentelemetry`).

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::trace::TraceContext;

impl TraceContext {
    /// The W3C context of `span`, or `None` when it is not valid (no trace).
    pub fn from_span_context(span: &SpanContext) -> Option<TraceContext> {
        if !span.is_valid() {
            return None;
        }
        let parent = format!(
            "00-{}-{}-{:02x}",
            span.trace_id(),
            span.span_id(),
            span.trace_flags().to_u8()
        );
        TraceContext::new(parent, Some(span.trace_state().header())).ok()
    }

    /// The W3C context of the span current in `context`, if it has a valid one.
    pub fn from_otel(context: &Context) -> Option<TraceContext> {
        TraceContext::from_span_context(context.span().span_context())
    }

    /// The OpenTelemetry context of the current `tracing` span (through the
    /// `tracing-opentelemetry` layer), if it has a valid one: `None` without that layer or
    /// outside any span.
    pub fn current() -> Option<TraceContext> {
        TraceContext::from_otel(&tracing::Span::current().context())
    }

    /// This context as a remote OpenTelemetry span context.
    pub fn span_context(&self) -> SpanContext {
        let trace_id = TraceId::from_hex(self.trace_id()).unwrap_or(TraceId::INVALID);
        let span_id = SpanId::from_hex(self.parent_id()).unwrap_or(SpanId::INVALID);
        let state = self
            .tracestate()
            .and_then(|s| s.parse::<TraceState>().ok())
            .unwrap_or_default();
        SpanContext::new(
            trace_id,
            span_id,
            TraceFlags::new(self.flags()),
            true,
            state,
        )
    }

    /// An OpenTelemetry context whose (remote) current span is this one.
    pub fn to_otel(&self) -> Context {
        Context::new().with_remote_span_context(self.span_context())
    }
}

/// Makes `span` (created, not yet entered) a child of `context`, with a link to it as the
/// messaging conventions ask of a consumer's span.
pub fn continue_trace(span: &tracing::Span, context: &TraceContext) {
    let remote = context.span_context();
    if span.set_parent(context.to_otel()).is_ok() {
        span.add_link(remote);
    }
}
