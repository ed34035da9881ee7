//! `wginfer serve`: the OpenAI-compatible HTTP server (`crate::serve`) on a tokio runtime,
//! until SIGINT or SIGTERM.

use anyhow::{Context, Result};
use clap::Args;

use super::ModelArgs;
use crate::serve::{model_name, serve, LogFormat, ServeOptions};

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Address to listen on (the default answers this machine only).
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port (0: any free one, printed at start).
    #[arg(long, default_value_t = 8080)]
    port: u16,
    /// Every /v1 route needs `Authorization: Bearer KEY` (default: $WGINFER_API_KEY).
    #[arg(long)]
    api_key: Option<String>,
    /// Let browser pages from ORIGIN (`*`: any) call the API; default: no CORS headers.
    #[arg(long, value_name = "ORIGIN")]
    cors: Option<String>,
    /// Requests that may wait beyond the --parallel running ones; past it, 503 with Retry-After.
    #[arg(long, default_value_t = 64)]
    max_waiting: usize,
    /// Largest request body in bytes (413 past it).
    #[arg(long, default_value_t = 2 << 20)]
    max_body: usize,
    /// One line per request on stderr, as text or JSON.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

pub fn run(a: &ServeArgs) -> Result<()> {
    // An empty key would leave the routes open: a slip, not a choice (leave the option out).
    anyhow::ensure!(
        a.api_key.as_deref() != Some(""),
        "--api-key is empty: give a key, or leave the option out to serve without one"
    );
    let model = a.model.model_path()?;
    let opts = ServeOptions {
        model: model.clone(),
        engine: a.model.engine_options()?,
        // An empty one is no key (`HttpOptions::new`).
        api_key: a.api_key.clone().or_else(|| std::env::var("WGINFER_API_KEY").ok()),
        cors: a.cors.clone(),
        max_waiting: a.max_waiting,
        body_limit: a.max_body,
        log: a.log_format,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting tokio")?;
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind((a.host.as_str(), a.port))
            .await
            .with_context(|| format!("listening on {}:{}", a.host, a.port))?;
        eprintln!("serving {} on http://{}", model_name(&model), listener.local_addr()?);
        serve(listener, opts, shutdown_signal()).await
    })
}

/// The first SIGINT (Ctrl-C) or SIGTERM: the server stops accepting and lets open requests
/// finish; a second one ends the process at once (a client that stopped reading would hold the
/// graceful shutdown for ever).
async fn shutdown_signal() {
    let message = "shutting down: finishing open requests (a second Ctrl-C or SIGTERM stops at once)";
    super::interrupt::first_signal(message, || {}).await;
}
