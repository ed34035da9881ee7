//! Console state: chat, controls, the engine thread's events, and the histories the panels plot.

use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};

// std's clock natively, the page's in a browser (std's panics on wasm32).
use web_time::Instant;

use eframe::egui;
use wginfer::engine::EngineOptions;
use wginfer::gpu::profiler::Timing;
use wginfer::kv::{KvLayout, KvOptions, KvType};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;
use wginfer::sched::{Command, Event, GenRequest, LoadStage, Metrics, Priority, RequestStats, Worker};
use wginfer::tokenizer::Message;

/// Where `make model` puts the default model.
/// KV memory of the console: a paged pool of 256 MiB shared by up to 8 conversations and
/// background requests at once.
const CONSOLE_KV: KvOptions = KvOptions {
    layout: KvLayout::Paged,
    context: 4096,
    parallel: 8,
    block: 16,
    blocks: None,
    memory: Some(256 << 20),
    sliding_window: false,
    dtype: KvType::F32,
};

/// The default model: where `make model` puts it, or in a page its URL beside the page (`make
/// web` serves it there).
#[cfg(not(target_arch = "wasm32"))]
const DEFAULT_MODEL: &str = "assets/models/SmolLM2-135M-Instruct.Q4_1.gguf";
#[cfg(target_arch = "wasm32")]
const DEFAULT_MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Prompts the "background load" control sends.
const BACKGROUND_PROMPTS: [&str; 4] = [
    "Summarize the history of the printing press.",
    "List ten uses for a paperclip.",
    "Explain how a refrigerator works.",
    "Write a short poem about autumn.",
];

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub model: Option<PathBuf>,
    pub prompt: Option<String>,
    /// The sampling controls' starting temperature and answer length (0.7 and 256 unless set).
    pub temperature: Option<f32>,
    pub max_tokens: Option<usize>,
    pub background: usize,
    pub screenshot: Option<PathBuf>,
    pub exit_after_frames: Option<u64>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    pub role: String,
    pub text: String,
}

pub struct ConsoleApp {
    pub(crate) worker: Worker,
    /// Load failures met before the engine loop saw the model (a page's fetch).
    pub(crate) page_errors: (Sender<String>, Receiver<String>),
    pub model_path: String,
    /// Description of the model in use.
    pub model: Option<String>,
    pub loading: Option<PathBuf>,
    /// What the load in progress is doing, once the engine thread has said.
    pub load_stage: Option<LoadStage>,
    pub load_error: Option<String>,
    pub system: String,
    pub input: String,
    pub messages: Vec<ChatMessage>,
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    pub background_count: usize,
    /// The chat request in flight.
    pub active: Option<u64>,
    next_id: u64,
    pub error: Option<String>,
    pub metrics: Metrics,
    /// The last non-empty per-dispatch timings.
    pub timings: Vec<Timing>,
    /// (seconds, waiting, running)
    pub queue_history: Vec<[f64; 3]>,
    /// Finished requests: (seconds, stats).
    pub finished: Vec<(f64, RequestStats)>,
    started: Instant,
    pub frames: u64,
    /// Time spent building the last frame, and between the last two frames (ms).
    pub frame_build_ms: f64,
    pub frame_interval_ms: f64,
    last_frame: Option<Instant>,
    opts: Options,
    /// The chat as text in the page's DOM.
    #[cfg(target_arch = "wasm32")]
    transcript: crate::page::Transcript,
}

impl ConsoleApp {
    pub fn new(ctx: &egui::Context, opts: Options) -> ConsoleApp {
        let worker = Worker::spawn_with_waker({
            let ctx = ctx.clone();
            move || ctx.request_repaint()
        });
        let default = PathBuf::from(DEFAULT_MODEL);
        // In a page the default model's URL is tried as is (a missing one is a failed load).
        let model =
            opts.model.clone().or_else(|| (cfg!(target_arch = "wasm32") || default.exists()).then_some(default));
        let mut app = ConsoleApp {
            worker,
            page_errors: channel(),
            model_path: model.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            model: None,
            loading: None,
            load_stage: None,
            load_error: None,
            system: String::new(),
            input: String::new(),
            messages: Vec::new(),
            sampling: SamplingParams {
                temperature: opts.temperature.unwrap_or(0.7),
                top_k: 40,
                top_p: 0.95,
                seed: 0,
                ..Default::default()
            },
            max_tokens: opts.max_tokens.unwrap_or(256),
            background_count: 4,
            active: None,
            next_id: 1,
            error: None,
            metrics: Metrics::default(),
            timings: Vec::new(),
            queue_history: Vec::new(),
            finished: Vec::new(),
            started: Instant::now(),
            frames: 0,
            frame_build_ms: 0.0,
            frame_interval_ms: 0.0,
            last_frame: None,
            opts,
            #[cfg(target_arch = "wasm32")]
            transcript: Default::default(),
        };
        if model.is_some() {
            app.load();
        }
        if app.opts.background > 0 {
            app.background_count = app.opts.background;
            app.submit_background();
        }
        app
    }

    /// Loads the model at `model_path`; the current one keeps serving if this fails.
    pub fn load(&mut self) {
        self.load_error = None;
        self.loading = Some(PathBuf::from(self.model_path.trim()));
        self.load_stage = None;
        crate::open::load(self, self.engine_options());
    }

    /// The console's engine: its KV pool, and GPU timings for the panels.
    pub(crate) fn engine_options(&self) -> EngineOptions {
        EngineOptions {
            forward: ForwardOptions { kv: CONSOLE_KV, profile: true, ..Default::default() },
            ..Default::default()
        }
    }

    fn chat_messages(&self) -> Vec<Message> {
        let system = (!self.system.trim().is_empty()).then(|| Message::new("system", &self.system));
        system.into_iter().chain(self.messages.iter().map(|m| Message::new(&m.role, &m.text))).collect()
    }

    fn submit(&mut self, messages: Vec<Message>, priority: Priority) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let req = GenRequest { id, messages, sampling: self.sampling.clone(), max_tokens: self.max_tokens, priority };
        self.worker.send(Command::Submit(req));
        id
    }

    /// Sends the input as the next user message.
    pub fn send(&mut self) {
        let text = self.input.trim().to_string();
        if text.is_empty() || self.active.is_some() {
            return;
        }
        self.input.clear();
        self.error = None;
        self.messages.push(ChatMessage { role: "user".into(), text });
        let id = self.submit(self.chat_messages(), Priority::Interactive);
        self.messages.push(ChatMessage { role: "assistant".into(), text: String::new() });
        self.active = Some(id);
    }

    /// A turn that failed leaves the history: its answer and its question, whose text goes
    /// back into the input box (unless something new was typed), so that the next message
    /// does not carry a request that failed (one past the context fails every time; two user
    /// turns in a row break templates that want them alternating).
    fn drop_failed_turn(&mut self) {
        self.messages.pop();
        if let Some(question) = self.messages.pop_if(|m| m.role == "user") {
            if self.input.trim().is_empty() {
                self.input = question.text;
            }
        }
    }

    pub fn stop(&mut self) {
        if let Some(id) = self.active {
            self.worker.send(Command::Cancel(id));
        }
    }

    pub fn new_chat(&mut self) {
        self.stop();
        self.active = None;
        self.messages.clear();
    }

    /// Queues `background_count` low-priority requests.
    pub fn submit_background(&mut self) {
        for i in 0..self.background_count {
            let prompt = BACKGROUND_PROMPTS[i % BACKGROUND_PROMPTS.len()];
            self.submit(vec![Message::new("user", prompt)], Priority::Background);
        }
    }

    /// Adds a queue sample as a staircase: points only where the depth changes.
    fn record_queue(&mut self, waiting: f64, running: f64) {
        let t = self.seconds();
        match self.queue_history.last().copied() {
            Some([_, w, r]) if w == waiting && r == running => {}
            Some([_, w, r]) => self.queue_history.extend([[t, w, r], [t, waiting, running]]),
            None => self.queue_history.push([t, waiting, running]),
        }
    }

    pub fn seconds(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Applies everything the engine thread has said since the last frame.
    pub fn poll(&mut self) {
        while let Ok(error) = self.page_errors.1.try_recv() {
            self.loading = None;
            self.load_error = Some(error);
        }
        while let Ok(e) = self.worker.events.try_recv() {
            match e {
                Event::Loading { path, stage } => {
                    self.loading = Some(path);
                    self.load_stage = Some(stage);
                }
                Event::Loaded { description, .. } => {
                    self.loading = None;
                    self.model = Some(description);
                    // `--prompt` (`?prompt=`) goes once the model is in; a page fetches the
                    // model first, so the engine loop hears of it only later.
                    if let Some(p) = self.opts.prompt.take() {
                        self.input = p;
                        self.send();
                    }
                }
                Event::LoadFailed { error, unloaded, .. } => {
                    self.loading = None;
                    self.load_error = Some(error);
                    if unloaded {
                        self.model = None;
                    }
                }
                Event::Started { .. } => {}
                Event::Token { id, text, .. } => {
                    if Some(id) == self.active {
                        if let Some(m) = self.messages.last_mut() {
                            m.text.push_str(&text);
                        }
                    }
                }
                Event::Finished(s) => {
                    if Some(s.id) == self.active {
                        self.active = None;
                    }
                    self.finished.push((self.seconds(), s));
                }
                Event::Failed { id, error } => {
                    if Some(id) == self.active {
                        self.active = None;
                        self.error = Some(error);
                        self.drop_failed_turn();
                    }
                }
                Event::Metrics(m) => {
                    if !m.timings.is_empty() {
                        self.timings = m.timings.clone();
                    }
                    self.record_queue(m.waiting as f64, m.running as f64);
                    self.metrics = m;
                }
            }
        }
    }

    /// One frame: read events, draw, and (headless) count frames and take the screenshot.
    pub fn ui(&mut self, ui: &mut egui::Ui) {
        let t0 = Instant::now();
        if let Some(prev) = self.last_frame {
            self.frame_interval_ms = t0.duration_since(prev).as_secs_f64() * 1e3;
        }
        self.last_frame = Some(t0);
        self.poll();
        super::panels::draw(self, ui);
        #[cfg(target_arch = "wasm32")]
        {
            let mut transcript = std::mem::take(&mut self.transcript);
            transcript.mirror(self);
            self.transcript = transcript;
        }
        self.frames += 1;
        if self.active.is_some() || self.loading.is_some() || self.opts.exit_after_frames.is_some() {
            ui.ctx().request_repaint();
        }
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(n) = self.opts.exit_after_frames {
            self.headless_exit(ui.ctx(), n);
        }
        self.frame_build_ms = t0.elapsed().as_secs_f64() * 1e3;
    }

    #[cfg(not(target_arch = "wasm32"))]
    fn headless_exit(&mut self, ctx: &egui::Context, n: u64) {
        if self.frames == n {
            match self.opts.screenshot.clone() {
                Some(path) => {
                    let ctx2 = ctx.clone();
                    ctx.request_screenshot(move |image| {
                        if let Err(e) = save_png(&path, &image) {
                            eprintln!("error: saving {}: {e:#}", path.display());
                        }
                        ctx2.send_viewport_cmd(egui::ViewportCommand::Close);
                    });
                }
                None => ctx.send_viewport_cmd(egui::ViewportCommand::Close),
            }
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn save_png(path: &std::path::Path, image: &egui::ColorImage) -> anyhow::Result<()> {
    let [w, h] = image.size;
    let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
    image::save_buffer(path, &rgba, w as u32, h as u32, image::ExtendedColorType::Rgba8)?;
    Ok(())
}

impl eframe::App for ConsoleApp {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        ConsoleApp::ui(self, ui);
    }
}
