//! The server's log lines (a loaded model, each request's end), as text or JSON, written to
//! stderr by a thread of their own through a bounded queue. The thread that routes every
//! answer only queues them: a stderr that blocks (a pipe nobody reads) stalls the writer alone,
//! and lines past the queue's room are dropped and counted (a line saying how many goes out
//! when the writer next writes), never holding up a client. A stderr that cannot be written
//! loses the line.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

/// How per-request log lines are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Lines that may wait for the writer; more are dropped.
const QUEUE_LINES: usize = 4096;

/// How long a shutdown waits for queued lines to be written.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

/// Queues log lines for the writer thread (`start`).
pub struct Log {
    format: LogFormat,
    lines: SyncSender<String>,
    dropped: Arc<AtomicU64>,
}

/// The writer thread: it ends once every `Log` is dropped and the queue is written.
pub struct LogWriter(JoinHandle<()>);

/// A log writing to `out` (stderr in the server).
pub fn start(format: LogFormat, mut out: impl Write + Send + 'static) -> Result<(Log, LogWriter)> {
    let (lines, queue) = sync_channel::<String>(QUEUE_LINES);
    let dropped = Arc::new(AtomicU64::new(0));
    let seen = dropped.clone();
    let writer = std::thread::Builder::new()
        .name("wginfer-serve-log".into())
        .spawn(move || {
            for line in queue {
                let n = seen.swap(0, Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "{}", dropped_line(format, n));
                }
                let _ = writeln!(out, "{line}");
            }
        })
        .context("spawning the log thread")?;
    Ok((Log { format, lines, dropped }, LogWriter(writer)))
}

fn dropped_line(format: LogFormat, n: u64) -> String {
    match format {
        LogFormat::Text => format!("({n} log lines dropped: stderr was not read fast enough)"),
        LogFormat::Json => serde_json::json!({ "log_lines_dropped": n }).to_string(),
    }
}

impl Log {
    /// Queues `text` or `json` (by the format); never waits.
    pub fn line(&self, text: String, json: serde_json::Value) {
        let line = match self.format {
            LogFormat::Text => text,
            LogFormat::Json => json.to_string(),
        };
        if self.lines.try_send(line).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl LogWriter {
    /// Waits for the queued lines to be written, for at most FLUSH_WAIT (a blocked stderr
    /// must not hold the shutdown). Every `Log` must be gone.
    pub fn flush(self) {
        let start = Instant::now();
        while !self.0.is_finished() && start.elapsed() < FLUSH_WAIT {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::{channel, Receiver};
    use std::sync::Mutex;

    /// Writes into a shared buffer once `open` says so; blocks until then (a pipe nobody reads).
    struct Gate {
        open: Receiver<()>,
        opened: bool,
        out: Arc<Mutex<Vec<u8>>>,
    }

    impl Write for Gate {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if !self.opened {
                self.open.recv().expect("the test opens the gate");
                self.opened = true;
            }
            self.out.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// With the writer blocked, lines past the queue's room are dropped at once (the caller
    /// never waits); once it writes again, one line says how many were dropped.
    #[test]
    fn a_blocked_writer_drops_lines_and_never_holds_the_caller() {
        let (opener, open) = channel();
        let out = Arc::new(Mutex::new(Vec::new()));
        let (log, writer) = start(LogFormat::Json, Gate { open, opened: false, out: out.clone() }).unwrap();
        let extra = 100;
        let start = Instant::now();
        // The writer holds one line while it blocks; the queue takes QUEUE_LINES more.
        for i in 0..QUEUE_LINES + 1 + extra {
            log.line(String::new(), serde_json::json!({ "line": i }));
        }
        assert!(start.elapsed() < Duration::from_secs(5), "queuing waited for the writer");
        opener.send(()).unwrap();
        // Waiting for room (`line` would drop it while the writer catches up).
        log.lines.send(serde_json::json!({ "line": "last" }).to_string()).unwrap();
        drop(log);
        writer.0.join().unwrap();
        let text = String::from_utf8(out.lock().unwrap().clone()).unwrap();
        let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let dropped: u64 = lines.iter().filter_map(|l| l["log_lines_dropped"].as_u64()).sum();
        let written = lines.iter().filter(|l| l["line"].is_u64()).count();
        // Whether the writer took its first line before or after the rest queued, every line
        // is either written or counted as dropped.
        assert_eq!(written as u64 + dropped, (QUEUE_LINES + 1 + extra) as u64, "{} lines", lines.len());
        assert!(dropped >= extra as u64, "{dropped} dropped");
        // One notice, or more where the writer took a line while drops were being counted.
        assert!(lines.iter().any(|l| l["log_lines_dropped"].is_u64()));
        assert_eq!(lines.last().unwrap()["line"], "last");
    }
}
