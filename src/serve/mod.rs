//! `wginfer serve`: an OpenAI-compatible HTTP server on the continuous batcher. `api` holds the
//! API's request and answer shapes and their checks, `http` the routes (axum), `hub` the bridge
//! to the engine thread (tokenizing, routing tokens, cancelling, stop strings through `stop`),
//! `log` its log lines, `prometheus` the `/metrics` text. The engine stays on its own thread (`sched::worker`).

pub mod api;
pub mod http;
pub mod hub;
pub mod log;
pub mod prometheus;
pub mod stop;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{bail, Result};
use tokio::net::TcpListener;

use crate::engine::EngineOptions;
pub use hub::model_name;
use hub::{Hub, State};
pub use log::LogFormat;

pub struct ServeOptions {
    pub model: PathBuf,
    pub engine: EngineOptions,
    /// Needed as `Authorization: Bearer KEY` on every /v1 route (none or empty: open).
    pub api_key: Option<String>,
    /// An origin browsers may call from (`*` for any); none: no CORS headers.
    pub cors: Option<String>,
    /// Requests that may wait beyond the `--parallel` running ones; past it, 503.
    pub max_waiting: usize,
    /// Largest request body in bytes; past it, 413.
    pub body_limit: usize,
    pub log: LogFormat,
}

/// Serves on `listener` until `shutdown` resolves (new connections stop, open ones finish), or
/// until the model fails to load or the engine thread stops (an error).
pub async fn serve(
    listener: TcpListener,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let http = http::HttpOptions::new(opts.api_key.as_deref(), opts.cors.as_deref(), opts.body_limit)?;
    let hub = Arc::new(Hub::start(&opts.model, &opts.engine, opts.max_waiting, opts.log)?);
    let app = http::router(hub.clone(), &http);
    let mut state = hub.state();
    let load_failed = async move {
        let _ = state.wait_for(|s| matches!(s, State::Failed(_))).await;
    };
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            tokio::select! {
                _ = shutdown => {}
                _ = load_failed => {}
            }
        })
        .await?;
    let state = hub.state().borrow().clone();
    // Joining the engine thread blocks: off the async workers.
    tokio::task::spawn_blocking(move || drop(hub)).await?;
    if let State::Failed(e) = state {
        bail!("{}: {e}", opts.model.display());
    }
    Ok(())
}
