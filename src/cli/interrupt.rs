//! Stopping a long run by signal, the same way for `batch` and `serve`: the first SIGINT
//! (Ctrl-C) or SIGTERM asks the run to wrap up (write the finished answers, let open requests
//! finish); a second one ends the process at once, with exit status 130, for when wrapping up
//! would wait on something that never comes (a client that stopped reading).

use std::io::Write;

/// Waits for the first signal, runs `on_first` and says `message` on stderr, then leaves a task
/// on the current tokio runtime that ends the process at the next signal (the runtime must
/// outlive the wait for it to).
pub async fn first_signal(message: &str, on_first: impl FnOnce()) {
    signal().await;
    on_first();
    // Not eprintln!: with stderr gone it would panic, and neither the run's end nor the exit
    // would come.
    let _ = writeln!(std::io::stderr(), "{message}");
    tokio::spawn(async {
        signal().await;
        let _ = writeln!(std::io::stderr(), "stopped at once");
        std::process::exit(130);
    });
}

/// SIGINT (Ctrl-C) or SIGTERM.
async fn signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = interrupt => {}
        _ = terminate => {}
    }
}
