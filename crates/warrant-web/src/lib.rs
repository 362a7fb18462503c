//! `warrant web`: the local web interface. A front end like the CLI: every page and every `/api/`
//! call is one typed operation of the application layer (`warrant-host`), called on a blocking
//! thread; nothing here decides who may do what. What this crate owns is the door: the
//! per-launch token and session cookie, CSRF, the `Host`/`Origin` checks, the response headers
//! and the limits (`guard.rs`). Its limits: one person (the installation's identity) per launch,
//! no TLS (a non-loopback bind is the operator's explicit choice, warned about).

mod api;
mod assets;
mod drives;
mod guard;
mod live;

use std::net::SocketAddr;
use std::sync::Arc;

use warrant_host::{HostError, Notices, Where};

pub use guard::Door;

/// How `warrant web` listens.
#[derive(Clone, Debug)]
pub struct Options {
    pub bind: SocketAddr,
    /// Set to listen on an address other than loopback (`--public`); then the token is
    /// needed on every `/api/` request besides the cookie.
    pub public: bool,
}

/// What the front end tells the person once the server listens.
#[derive(Clone, Debug)]
pub struct Launched {
    /// The address to open, carrying the launch's token (shown once, never stored).
    pub url: String,
    /// Set when the bind is not loopback.
    pub warning: Option<String>,
}

/// Where the server takes its installation and how it tells the person about notices.
pub type NoticesFor = fn() -> Arc<dyn Notices + Send>;

/// Serves the interface until the process ends (Ctrl-C). `launched` is called once the socket
/// listens, with the URL that carries the token.
pub fn serve(
    at: Where,
    notices: NoticesFor,
    options: Options,
    launched: impl FnOnce(&Launched),
) -> Result<(), HostError> {
    if !options.bind.ip().is_loopback() && !options.public {
        return Err(HostError::usage(
            "W-WEBUI-001",
            format!(
                "{} is not a loopback address: anyone who can reach it could try the interface; pass --public to listen there anyway (the token is then needed on every request)",
                options.bind
            ),
        ));
    }
    // The installation is opened once before listening, so a broken one is said at once.
    warrant_host::Host::open(&at, notices())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .max_blocking_threads(64)
        .enable_all()
        .build()
        .map_err(|e| {
            HostError::usage(
                "W-WEBUI-002",
                format!("cannot start the web server's runtime: {e}"),
            )
        })?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(options.bind)
            .await
            .map_err(|e| {
                HostError::usage(
                    "W-WEBUI-003",
                    format!("cannot listen on {}: {e}", options.bind),
                )
            })?;
        let local = listener.local_addr().map_err(|e| {
            HostError::usage("W-WEBUI-003", format!("cannot read the bound address: {e}"))
        })?;
        let (door, token) = Door::new(local, options.public);
        let state = Arc::new(api::Web::new(at, notices, door));
        let app = api::router(state);
        let warning = (!local.ip().is_loopback()).then(|| {
            format!(
                "listening on {local}, which is not loopback: the connection is not encrypted, and anyone on that network who learns the token can act as you"
            )
        });
        launched(&Launched {
            url: format!("http://{}/?token={token}", guard::authority(local)),
            warning,
        });
        drop(token);
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| HostError::usage("W-WEBUI-003", format!("the web server stopped: {e}")))
    })
}
