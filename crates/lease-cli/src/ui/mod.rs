//! `lease ui`: the operator console in a browser (docs/decisions/0043-console.md). An axum
//! router, served by its own accept loop ([`listen`]: TLS, header timeout, connection cap),
//! renders the namespace and each execution as HTML from the same data functions the other
//! commands print ([`crate::commands`]); an open page gets its live part pushed as server-sent
//! events, re-read when the backend signals a wake-up ([`live`]); the controls are POST
//! forms, only with `--allow-writes`, each logged ([`controls`]); every request passes
//! [`guard::check`].

mod activity;
mod activity_page;
mod audit;
mod browse;
mod charts;
mod controls;
mod guard;
mod html;
mod listen;
mod live;
mod pages;
mod select;
mod session;
mod state;
mod timeline;
mod tls;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::routing::{get, post};
use lease::LeaseBackend;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use crate::cli::UiArgs;
use crate::connect::Limits;
use crate::failure::Failure;
use crate::output::Output;

use self::guard::Reach;
use self::session::AccessToken;
use self::state::Ui;

/// What `lease ui` checked before opening the backend.
pub struct Prepared {
    token: AccessToken,
    tls: Option<TlsAcceptor>,
    reach: Reach,
}

/// Refuses, before connecting, a token too weak to use, TLS files that do not read, and a
/// non-loopback address served in plain text without a TLS proxy in front.
pub fn check(args: &UiArgs) -> Result<Prepared, Failure> {
    let token = AccessToken::new(args.access_token.as_deref())?;
    if args.session_ttl < Duration::from_secs(1)
        || args.header_timeout.is_zero()
        || args.write_timeout.is_zero()
    {
        return Err(Failure::Usage(
            "--session-ttl must be at least 1s (a cookie counts whole seconds), and \
             --header-timeout and --write-timeout more than 0"
                .to_owned(),
        ));
    }
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(tls::acceptor(cert, key)?),
        _ => None,
    };
    if tls.is_none() && !args.behind_tls_proxy && !args.listen.ip().is_loopback() {
        return Err(Failure::Usage(format!(
            "listening on {} serves other machines in plain text: give --tls-cert FILE \
             --tls-key FILE, or --behind-tls-proxy when a TLS proxy in front of the console \
             serves it",
            args.listen
        )));
    }
    let reach = Reach {
        secure: tls.is_some() || args.behind_tls_proxy,
        proxied: args.behind_tls_proxy,
    };
    Ok(Prepared { token, tls, reach })
}

/// Serves the console on `args.listen` until the process is stopped; prints the address it
/// serves, with the access token when this process drew it (never the URL's password nor a
/// given token).
pub async fn serve(
    prepared: Prepared,
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
    let guard = guard::Guard::new(local, &prepared.token, prepared.reach, args.session_ttl);
    let ui = Arc::new(Ui {
        shown: format!(
            "{} namespace {namespace} at {}",
            backend.backend_name(),
            lease::redact_url(url)
        ),
        backend,
        limits,
        guard: Arc::new(guard),
        allow_writes: args.allow_writes,
        refresh: args.refresh,
        streams: Arc::new(Semaphore::new(args.max_event_streams as usize)),
        activity: Arc::new(activity::Activity::new(args.sample_every)),
    });
    activity::spawn_sampler(Arc::clone(&ui.backend), Arc::clone(&ui.activity));
    print_address(&prepared, local, &ui, args.allow_writes);
    let bounds = listen::Bounds {
        header_timeout: args.header_timeout,
        write_timeout: args.write_timeout,
        max_connections: args.max_connections as usize,
        tls: prepared.tls,
    };
    let e = listen::serve(listener, router(ui), bounds).await;
    Err(Failure::Failed(format!("the console stopped: {e}")))
}

/// The startup line: the address to open (with a drawn token, as Jupyter prints its own).
fn print_address(prepared: &Prepared, local: SocketAddr, ui: &Ui, allow_writes: bool) {
    let scheme = if prepared.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let token = if prepared.token.drawn {
        format!("?access_token={}", prepared.token.value)
    } else {
        String::new()
    };
    let mode = if allow_writes {
        "read-write"
    } else {
        "read-only"
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "lease ui: serving {scheme}://{local}/{token} ({mode}) for {}",
        ui.shown
    );
    let _ = out.flush();
}

/// The routes: pages, their event streams and script; the controls with `--allow-writes`.
fn router(ui: Arc<Ui>) -> Router {
    let mut router = Router::new()
        .route("/", get(pages::namespace))
        .route("/execution", get(pages::execution))
        .route("/executions", get(browse::executions))
        .route("/dead", get(browse::dead))
        .route("/activity", get(activity_page::activity))
        .route("/events/activity", get(live::activity))
        .route("/events/namespace", get(live::namespace))
        .route("/events/execution", get(live::execution))
        .route("/live.js", get(live::script));
    if ui.allow_writes {
        router = router
            .route("/cancel", post(controls::cancel))
            .route("/retry", post(controls::retry))
            .route("/act", post(select::act))
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
