//! `wginfer-console`: the desktop console. The engine runs on its own thread; this thread only
//! draws. `--screenshot PATH --exit-after-frames N` renders N frames, saves the last as a PNG and
//! exits, for headless runs under Xvfb. Built for wasm32 it is the page's console (`make web`,
//! app/web/index.html): the engine loop is a task of the page, `?model=URL&prompt=TEXT&temperature=T&max_tokens=N`
//! as the flags.

#[cfg(not(target_arch = "wasm32"))]
use clap::Parser;
#[cfg(not(target_arch = "wasm32"))]
use std::path::PathBuf;
use wginfer_console::{ConsoleApp, Options};

#[cfg(not(target_arch = "wasm32"))]
#[derive(Parser)]
#[command(name = "wginfer-console", version, about = "Chat with a model and watch the engine work")]
struct Args {
    /// A GGUF file or Hugging Face folder (default: the default model when present).
    #[arg(long)]
    model: Option<PathBuf>,
    /// Send this prompt once the model is loaded.
    #[arg(long)]
    prompt: Option<String>,
    /// Starting temperature (0: greedy; default 0.7).
    #[arg(long)]
    temperature: Option<f32>,
    /// Starting answer length in tokens (default 256).
    #[arg(long)]
    max_tokens: Option<usize>,
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

#[cfg(not(target_arch = "wasm32"))]
fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    let opts = Options {
        model: a.model,
        prompt: a.prompt,
        temperature: a.temperature,
        max_tokens: a.max_tokens,
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

/// The page's console on the canvas `#console`; a failure to start is written into the page.
#[cfg(target_arch = "wasm32")]
fn main() {
    use wasm_bindgen::JsCast;
    // Panics and the engine's warnings go to the browser's console.
    let _ = eframe::WebLogger::init(log::LevelFilter::Warn);
    wasm_bindgen_futures::spawn_local(async {
        let document = web_sys::window().and_then(|w| w.document()).expect("a page has a document");
        let query = web_sys::window()
            .and_then(|w| w.location().search().ok())
            .and_then(|q| web_sys::UrlSearchParams::new_with_str(&q).ok());
        let param = |name: &str| query.as_ref().and_then(|q| q.get(name)).filter(|v| !v.is_empty());
        let opts = Options {
            model: param("model").map(Into::into),
            prompt: param("prompt"),
            temperature: param("temperature").and_then(|t| t.parse().ok()),
            max_tokens: param("max_tokens").and_then(|n| n.parse().ok()),
            ..Default::default()
        };
        let canvas =
            document.get_element_by_id("console").and_then(|e| e.dyn_into::<web_sys::HtmlCanvasElement>().ok());
        let started = match canvas {
            Some(canvas) => eframe::WebRunner::new()
                .start(
                    canvas,
                    eframe::WebOptions::default(),
                    Box::new(|cc| Ok(Box::new(ConsoleApp::new(&cc.egui_ctx, opts)))),
                )
                .await
                .map_err(|e| format!("{e:?}")),
            None => Err("the page has no <canvas id=\"console\">".into()),
        };
        if let (Err(e), Some(body)) = (started, document.body()) {
            body.set_text_content(Some(&format!("The console could not start: {e}")));
        }
    });
}
