//! Stopping a long run by signal, the same way for `batch` and `serve`: the first SIGINT
//! (Ctrl-C) or SIGTERM asks the run to wrap up (write the finished answers, let open requests
//! finish); a second one ends the process at once, with exit status 130, for when wrapping up
//! would wait on something that never comes (a client that stopped reading, a stderr nobody
//! reads).

use std::io::Write;

/// How long the second signal's exit waits for its note to reach stderr.
const NOTE_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Waits for the first signal and runs `on_first`; from then on a task on the current tokio
/// runtime ends the process at the next signal (the runtime must outlive the wait for it to).
/// `message` goes to stderr from a thread of its own: a blocked stderr holds neither the run's
/// wrapping up nor the second signal's exit.
pub async fn first_signal(message: &'static str, on_first: impl FnOnce()) {
    // Listening from the start: a signal between the first and the second task's first poll
    // is not lost.
    let mut signals = Signals::new();
    signals.next().await;
    on_first();
    tokio::spawn(async move {
        signals.next().await;
        // Blocked stderr: a write waits on the pipe, or on the lock of the thread that does.
        let note = tokio::task::spawn_blocking(|| writeln!(std::io::stderr(), "stopped at once"));
        let _ = tokio::time::timeout(NOTE_WAIT, note).await;
        std::process::exit(130);
    });
    std::thread::spawn(move || {
        let _ = writeln!(std::io::stderr(), "{message}");
    });
}

/// SIGINT and SIGTERM as they arrive (SIGINT alone where there is no SIGTERM). One that cannot
/// be listened to never arrives (not at once: that would stop every run as it starts).
struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            Signals { interrupt: signal(SignalKind::interrupt()).ok(), terminate: signal(SignalKind::terminate()).ok() }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    #[cfg(unix)]
    async fn next(&mut self) {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            if let Some(s) = s {
                if s.recv().await.is_some() {
                    return;
                }
            }
            std::future::pending().await
        }
        tokio::select! {
            _ = recv(&mut self.interrupt) => {}
            _ = recv(&mut self.terminate) => {}
        }
    }

    #[cfg(not(unix))]
    async fn next(&mut self) {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
