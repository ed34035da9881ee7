//! `wginfer-console`: the desktop console. The engine runs on its own thread; this thread only
//! draws. `--screenshot PATH --exit-after-frames N` renders N frames, saves the last as a PNG and
//! exits, for headless runs under Xvfb.

use std::path::PathBuf;

use clap::Parser;
use wginfer_console::{ConsoleApp, Options};

#[derive(Parser)]
#[command(name = "wginfer-console", version, about = "Chat with a model and watch the engine work")]
struct Args {
    /// A GGUF file or Hugging Face folder (default: the default model when present).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Send this prompt once the model is loaded.
    #[arg(long)]
    prompt: Option<String>,
    /// Queue this many low-priority requests at start (as the "background load" control does).
    #[arg(long, default_value_t = 0)]
    background: usize,
    /// Save the last rendered frame here (PNG), then exit.
    #[arg(long, requires = "exit_after_frames")]
    screenshot: Option<PathBuf>,
    /// Exit after rendering this many frames.
    #[arg(long)]
    exit_after_frames: Option<u64>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let opts = Options {
        model: a.model,
        prompt: a.prompt,
        background: a.background,
        screenshot: a.screenshot,
        exit_after_frames: a.exit_after_frames,
    };
    let native = eframe::NativeOptions {
        viewport: eframe::egui::ViewportBuilder::default()
            .with_inner_size([1400.0, 900.0])
            .with_title("wginfer console"),
        ..Default::default()
    };
    eframe::run_native("wginfer console", native, Box::new(|cc| Ok(Box::new(ConsoleApp::new(&cc.egui_ctx, opts)))))
        .map_err(|e| anyhow::anyhow!("the console could not start: {e}"))
}
