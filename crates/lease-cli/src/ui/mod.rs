//! `lease ui`: the operator console in a browser (DESIGN "Console (`lease ui`)"). An axum
//! server on the command's runtime renders the namespace and each execution as HTML from the
//! same data functions the other commands print ([`crate::commands`]); an open page gets its
//! live part pushed as server-sent events, re-read when the backend signals a wake-up
//! ([`live`]); the controls are POST forms, only with `--allow-writes` ([`controls`]); every
//! request passes [`guard::check`].

mod controls;
mod guard;
mod html;
mod live;
mod pages;
mod state;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::routing::{get, post};
use lease::LeaseBackend;

use crate::cli::UiArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

use self::state::Ui;

/// Refuses, before connecting, a listening address that needs an access token and has none,
/// or a token too weak to use.
pub fn check(args: &UiArgs) -> Result<(), Failure> {
    guard::Guard::new(args.listen, args.access_token.as_deref()).map(drop)
}

/// Serves the console on `args.listen` until the process is stopped; prints the address
/// it serves (never the URL's password nor the access token).
pub async fn serve(
    backend: Arc<dyn LeaseBackend>,
    args: &UiArgs,
    limits: Limits,
    url: &str,
) -> Result<Output, Failure> {
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Failed(format!("cannot listen on {}: {e}", args.listen)))?;
    let local: SocketAddr = listener
        .local_addr()
        .map_err(|e| Failure::Failed(format!("no local address: {e}")))?;
    let namespace = backend.namespace_name().unwrap_or_else(|| "-".to_owned());
    let ui = Arc::new(Ui {
        shown: format!(
            "{} namespace {namespace} at {}",
            backend.backend_name(),
            lease::redact_url(url)
        ),
        backend,
        limits,
        guard: Arc::new(guard::Guard::new(local, args.access_token.as_deref())?),
        allow_writes: args.allow_writes,
        refresh: args.refresh,
    });
    let mode = if args.allow_writes {
        "read-write"
    } else {
        "read-only"
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "lease ui: serving http://{local}/ ({mode}) for {}",
        ui.shown
    );
    let _ = out.flush();
    drop(out);
    axum::serve(listener, router(ui))
        .await
        .map_err(|e| Failure::Failed(format!("the console stopped: {e}")))?;
    Ok(Output {
        text: String::new(),
        json: serde_json::Value::Null,
    })
}

/// The routes: pages, their event streams and script; the controls with `--allow-writes`.
fn router(ui: Arc<Ui>) -> Router {
    let mut router = Router::new()
        .route("/", get(pages::namespace))
        .route("/execution", get(pages::execution))
        .route("/events/namespace", get(live::namespace))
        .route("/events/execution", get(live::execution))
        .route("/live.js", get(live::script));
    if ui.allow_writes {
        router = router
            .route("/cancel", post(controls::cancel))
            .route("/retry", post(controls::retry))
            .route("/pause", post(controls::pause))
            .route("/resume", post(controls::resume))
            .route("/purge-dry-run", post(controls::purge_dry_run));
    }
    router
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&ui.guard),
            guard::check,
        ))
        .with_state(ui)
}
