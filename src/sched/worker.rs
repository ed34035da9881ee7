//! The engine loop. It owns the `Engine` and a continuous batcher: requests (chat messages)
//! are tokenized as they arrive and joined to the running batch at the next step; every step
//! streams each request's new text, and metrics follow. Interactive requests are admitted and
//! planned first (`batch.rs`); a cancelled request frees its memory at once. One async loop:
//! natively on its own thread (blocked on), in a page a task on the page's event loop.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender};

use anyhow::{anyhow, Context, Result};
use futures_channel::mpsc::{unbounded, UnboundedReceiver, UnboundedSender};
use futures_util::StreamExt;

use super::batch::{BatchOptions, Batcher, SeqEvent};
use super::metrics::Summary;
use super::sequence::{SeqRequest, SeqStats, TokenLogprobs};
use super::Priority;
use crate::engine::{Engine, EngineOptions, Finish};
use crate::gpu::profiler::Timing;
use crate::ops::attention::AttnKind;
use crate::sampling::SamplingParams;
use crate::tokenizer::{Message, StreamDecoder, NO_TEMPLATE_NOTICE};

#[derive(Clone, Debug)]
pub struct GenRequest {
    pub id: u64,
    pub messages: Vec<Message>,
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    pub priority: Priority,
}

/// Where a model comes from.
pub enum ModelSource {
    /// A GGUF file or a Hugging Face folder (native).
    Path(PathBuf),
    /// A GGUF file's bytes (a page's file picker or `fetch`), under `name`.
    Gguf { name: String, bytes: Vec<u8> },
}

impl ModelSource {
    /// The path, or the name it stands under, for events and messages.
    pub fn path(&self) -> PathBuf {
        match self {
            ModelSource::Path(p) => p.clone(),
            ModelSource::Gguf { name, .. } => PathBuf::from(name),
        }
    }

    /// The model on a new device (the page's adapter in a browser); natively with its kernels
    /// run once (`Engine::warm_up`), so the status line says "compiling kernels" while lavapipe
    /// compiles them rather than the first answer waiting. `stage` hears each stage begin.
    async fn open(self, opts: &EngineOptions, stage: impl Fn(LoadStage)) -> Result<Engine> {
        stage(LoadStage::Weights);
        let engine = self.open_cold(opts).await?;
        #[cfg(not(target_arch = "wasm32"))]
        let engine = {
            let mut engine = engine;
            stage(LoadStage::Kernels);
            engine.warm_up()?;
            engine
        };
        Ok(engine)
    }

    async fn open_cold(self, opts: &EngineOptions) -> Result<Engine> {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            ModelSource::Path(path) => Engine::load(&path, opts),
            #[cfg(target_arch = "wasm32")]
            ModelSource::Path(path) => {
                anyhow::bail!("{}: a page cannot open paths; hand over the bytes", path.display())
            }
            ModelSource::Gguf { name, bytes } => {
                #[cfg(not(target_arch = "wasm32"))]
                let gpu = crate::gpu::Gpu::new(&opts.gpu)?;
                #[cfg(target_arch = "wasm32")]
                let gpu = crate::gpu::Gpu::new_async(&opts.gpu).await?;
                Engine::from_gguf_bytes(gpu, &name, &bytes, &opts.forward)
            }
        }
    }
}

pub enum Command {
    /// Load a model (the current one keeps serving if this fails); applied once the running
    /// requests have finished.
    Load(ModelSource, Box<EngineOptions>),
    Submit(GenRequest),
    /// A request already in token ids (a server tokenizes on its side to check the prompt's
    /// length before answering).
    SubmitIds(SeqRequest),
    /// Stop a request, waiting or running.
    Cancel(u64),
    Shutdown,
}

/// What one finished request measured.
#[derive(Clone, Debug)]
pub struct RequestStats {
    pub id: u64,
    pub priority: Priority,
    pub queued_ms: f64,
    pub ttft_ms: f64,
    pub decode_tok_s: f64,
    pub tokens: usize,
    pub finish: Finish,
    pub prompt_tokens: usize,
    /// Gaps between consecutive tokens, and arrival to the last token (ms).
    pub itl_ms: Vec<f64>,
    pub total_ms: f64,
}

impl RequestStats {
    fn from(s: &SeqStats) -> RequestStats {
        let decode_ms: f64 = s.itl_ms.iter().sum();
        RequestStats {
            id: s.id,
            priority: s.priority,
            queued_ms: s.queued_ms,
            ttft_ms: s.ttft_ms,
            decode_tok_s: if decode_ms > 0.0 { s.itl_ms.len() as f64 / decode_ms * 1e3 } else { 0.0 },
            tokens: s.tokens,
            finish: s.finish,
            prompt_tokens: s.prompt_tokens,
            itl_ms: s.itl_ms.clone(),
            total_ms: s.total_ms,
        }
    }
}

/// A snapshot of the engine after a step.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub waiting: usize,
    pub running: usize,
    /// Rows (tokens) of the last step, of every running sequence.
    pub batch_rows: u32,
    /// KV blocks held by sequences, and all of them; positions per block.
    pub kv_blocks_used: u32,
    pub kv_blocks: u32,
    pub kv_block: u32,
    /// Engine-wide TTFT, inter-token and request latency percentiles, throughput.
    pub summary: Summary,
    /// GPU time per dispatch of the last step; empty without timestamp queries.
    pub timings: Vec<Timing>,
    pub attention: Option<AttnKind>,
    pub timestamps: bool,
}

/// What a load is doing, for a status line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadStage {
    /// Reading the weights onto the device.
    Weights,
    /// Running every kernel once, so the driver compiles them now (seconds on lavapipe the
    /// first time; its shader cache keeps them for later loads).
    Kernels,
}

impl std::fmt::Display for LoadStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LoadStage::Weights => "reading weights",
            LoadStage::Kernels => "compiling kernels",
        })
    }
}

pub enum Event {
    /// A load reached `stage`.
    Loading {
        path: PathBuf,
        stage: LoadStage,
    },
    Loaded {
        path: PathBuf,
        description: String,
        /// The most positions one sequence may hold (`KvCache::sequence_positions`).
        positions: usize,
    },
    LoadFailed {
        path: PathBuf,
        error: String,
        /// The loaded model was dropped (a panic in a step, a lost device); otherwise a new load
        /// failed and the model loaded before, if any, serves on.
        unloaded: bool,
    },
    Started {
        id: u64,
    },
    /// New text (empty when the token ends inside a character, and logprobs were asked for),
    /// with the token's log-probabilities when its request asked for them.
    Token {
        id: u64,
        text: String,
        logprobs: Option<TokenLogprobs>,
        /// The request's tokens generated so far, the text's last included: where a stop
        /// string found in the text ends the answer, what its usage counts.
        tokens: usize,
    },
    Finished(RequestStats),
    Failed {
        id: u64,
        error: String,
    },
    Metrics(Metrics),
}

/// Handle to the engine loop.
pub struct Worker {
    tx: UnboundedSender<Command>,
    pub events: Receiver<Event>,
    #[cfg(not(target_arch = "wasm32"))]
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Worker {
    pub fn spawn() -> Worker {
        Self::spawn_with_waker(|| {})
    }

    /// Like `spawn`; `wake` runs after every event (a UI asks for a repaint there).
    pub fn spawn_with_waker(wake: impl Fn() + Send + 'static) -> Worker {
        let (tx, commands) = unbounded();
        let (events_tx, events) = channel();
        let engine = EngineLoop {
            commands,
            events: events_tx,
            wake: Box::new(wake),
            model: None,
            streams: HashMap::new(),
            open: HashSet::new(),
            deferred: Vec::new(),
        };
        #[cfg(not(target_arch = "wasm32"))]
        {
            let thread = std::thread::Builder::new()
                .name("wginfer-engine".into())
                .spawn(move || pollster::block_on(engine.run()))
                .expect("spawning the engine thread");
            Worker { tx, events, thread: Some(thread) }
        }
        #[cfg(target_arch = "wasm32")]
        {
            wasm_bindgen_futures::spawn_local(engine.run());
            Worker { tx, events }
        }
    }

    pub fn send(&self, c: Command) {
        let _ = self.tx.unbounded_send(c);
    }

    /// A sender of commands for other threads (the server's handlers), while one thread reads
    /// the events.
    pub fn commands(&self) -> UnboundedSender<Command> {
        self.tx.clone()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.tx.unbounded_send(Command::Shutdown);
        #[cfg(not(target_arch = "wasm32"))]
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct EngineLoop {
    commands: UnboundedReceiver<Command>,
    events: Sender<Event>,
    wake: Box<dyn Fn() + Send>,
    model: Option<(Engine, Batcher)>,
    /// The text decoder of each request that has produced a token.
    streams: HashMap<u64, StreamDecoder>,
    /// Requests handed to the batcher and not yet told their end (`Finished` or `Failed`): a
    /// failed step fails them all, also those whose end was among the step's lost events.
    open: HashSet<u64>,
    /// Model loads that arrived while requests ran, applied when none is left.
    deferred: Vec<Command>,
}

impl EngineLoop {
    async fn run(mut self) {
        loop {
            // Wait only when idle; when busy take what has arrived, else run a step (also once
            // every sender is gone: the running requests finish first).
            let next = match self.busy() {
                false => self.commands.next().await,
                true => self.commands.try_recv().ok(),
            };
            match next {
                Some(c) => {
                    if !self.handle(c).await {
                        return;
                    }
                    continue;
                }
                None if !self.busy() => return,
                None => self.step_or_fail().await,
            }
            if !self.busy() {
                for c in std::mem::take(&mut self.deferred) {
                    self.handle(c).await;
                }
            }
        }
    }

    /// A step; where it fails or panics, the requests it ran fail with the reason.
    async fn step_or_fail(&mut self) {
        match caught(self.step()).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                // What the step finished or refused before it failed still reaches its client.
                if let Some((_, batcher)) = self.model.as_mut() {
                    let held = batcher.take_held();
                    let _ = self.deliver(held);
                }
                self.fail_all(&format!("{e:#}"));
                self.unload_if_lost();
                // The gauges (running, waiting, KV blocks) as the failures left them.
                self.send_metrics();
            }
            Err(panic) => self.unload_after_panic(&panic),
        }
    }

    /// Whether requests are waiting or running.
    fn busy(&self) -> bool {
        self.model.as_ref().is_some_and(|(_, b)| !b.is_idle())
    }

    fn emit(&mut self, e: Event) {
        let ended = match &e {
            Event::Finished(s) => Some(s.id),
            Event::Failed { id, .. } => Some(*id),
            _ => None,
        };
        if let Some(id) = ended {
            self.open.remove(&id);
            self.streams.remove(&id);
        }
        send(&self.events, &*self.wake, e);
    }

    /// Applies a command; false when the loop should end.
    async fn handle(&mut self, c: Command) -> bool {
        match c {
            Command::Load(..) if self.busy() => self.deferred.push(c),
            Command::Load(source, opts) => {
                let path = source.path();
                let (events, wake) = (&self.events, &*self.wake);
                let stage = |stage| send(events, wake, Event::Loading { path: path.clone(), stage });
                let loaded = caught(source.open(&opts, stage)).await;
                match loaded.unwrap_or_else(|p| Err(anyhow!("the loader panicked: {p}"))) {
                    Ok(mut e) => {
                        let description = describe(&e);
                        let positions = e.forward.kv.sequence_positions() as usize;
                        let opts = BatchOptions::for_adapter(&e.gpu.caps);
                        let b = Batcher::new(&mut e, opts);
                        self.model = Some((e, b));
                        self.emit(Event::Loaded { path, description, positions });
                    }
                    Err(err) => self.emit(Event::LoadFailed { path, error: format!("{err:#}"), unloaded: false }),
                }
                self.send_metrics();
            }
            Command::Submit(req) => {
                let submitted = caught(async { self.submit(&req) }).await;
                if let Err(e) = submitted.unwrap_or_else(|p| Err(anyhow!("panicked: {p}"))) {
                    self.emit(Event::Failed { id: req.id, error: format!("{e:#}") });
                }
                self.send_metrics();
            }
            Command::SubmitIds(req) => {
                match self.model.as_mut() {
                    Some((_, batcher)) => {
                        self.open.insert(req.id);
                        batcher.submit(req);
                    }
                    None => self.emit(Event::Failed { id: req.id, error: "no model is loaded".into() }),
                }
                self.send_metrics();
            }
            Command::Cancel(id) => {
                if let Some((e, b)) = self.model.as_mut() {
                    if let Some(s) = b.cancel(e, id) {
                        self.emit(Event::Finished(RequestStats::from(&s)));
                    }
                }
                self.send_metrics();
            }
            Command::Shutdown => return false,
        }
        true
    }

    fn submit(&mut self, req: &GenRequest) -> Result<()> {
        let (engine, batcher) = self.model.as_mut().context("no model is loaded")?;
        let tok = engine.tokenizer.as_ref().context("the model has no tokenizer")?;
        let prompt_ids = tok.encode_chat(&req.messages)?;
        self.open.insert(req.id);
        batcher.submit(SeqRequest {
            id: req.id,
            prompt_ids,
            max_tokens: req.max_tokens,
            sampling: req.sampling.clone(),
            stop_at_eos: true,
            priority: req.priority,
            logprobs: None,
        });
        Ok(())
    }

    /// One batcher step, its tokens streamed as text.
    async fn step(&mut self) -> Result<()> {
        let (engine, batcher) = self.model.as_mut().expect("busy means loaded");
        let events = batcher.step_async(engine).await?;
        self.deliver(events)?;
        self.send_metrics();
        Ok(())
    }

    /// The batcher's events as the front end's: new tokens as text, ends with their stats.
    fn deliver(&mut self, events: Vec<SeqEvent>) -> Result<()> {
        let (engine, _) = self.model.as_mut().expect("busy means loaded");
        let tok = engine.tokenizer.as_ref().context("the model has no tokenizer")?;
        let mut out = Vec::new();
        for ev in events {
            match ev {
                SeqEvent::Token { id, token, logprobs } => {
                    let stream = self.streams.entry(id).or_insert_with(|| {
                        out.push(Event::Started { id });
                        StreamDecoder::default()
                    });
                    let text = stream.push(tok, token)?;
                    if text.is_some() || logprobs.is_some() {
                        out.push(Event::Token {
                            id,
                            text: text.unwrap_or_default(),
                            logprobs,
                            tokens: stream.tokens(),
                        });
                    }
                }
                SeqEvent::Finished(s) => {
                    if let Some(stream) = self.streams.remove(&s.id) {
                        let tokens = stream.tokens();
                        let text = stream.finish(tok)?;
                        if !text.is_empty() {
                            out.push(Event::Token { id: s.id, text, logprobs: None, tokens });
                        }
                    }
                    out.push(Event::Finished(RequestStats::from(&s)));
                }
                SeqEvent::Failed { id, error } => out.push(Event::Failed { id, error }),
            }
        }
        for e in out {
            self.emit(e);
        }
        Ok(())
    }

    /// A step failed on the GPU: every request ends with the error, the model stays loaded.
    fn fail_all(&mut self, error: &str) {
        if let Some((engine, batcher)) = self.model.as_mut() {
            for id in batcher.ids() {
                batcher.abandon(engine, id);
            }
        }
        self.fail_open(error);
    }

    /// Every request not yet told its end fails with `error`.
    fn fail_open(&mut self, error: &str) {
        let mut ids: Vec<u64> = self.open.iter().copied().collect();
        ids.sort_unstable();
        for id in ids {
            self.emit(Event::Failed { id, error: error.to_string() });
        }
    }

    /// After a failed step: a lost device cannot run the model again, so it is dropped and the
    /// front end told, as a failed load, that it can load it again (on a new device).
    fn unload_if_lost(&mut self) {
        let Some(why) = self.model.as_ref().and_then(|(e, _)| e.gpu.lost()) else { return };
        if let Some((engine, _)) = self.model.take() {
            let error = format!("the GPU device was lost ({why}); the model was unloaded, load it again");
            self.emit(Event::LoadFailed { path: engine.model_path.clone(), error, unloaded: true });
        }
    }

    /// A step panicked: the batcher and the engine may be half-way through it, so every
    /// request fails without touching them, and the model is dropped and the front end told,
    /// as a failed load (the console can load it again; the server reports itself unhealthy
    /// and stops rather than answer every later request with "no model is loaded").
    fn unload_after_panic(&mut self, panic: &str) {
        let error = format!("the engine panicked ({panic}); the model was unloaded, load it again");
        if let Some((engine, _)) = self.model.take() {
            self.fail_open(&error);
            self.emit(Event::LoadFailed { path: engine.model_path.clone(), error, unloaded: true });
        }
        self.send_metrics();
    }

    fn send_metrics(&self) {
        let mut m = Metrics::default();
        if let Some((e, b)) = &self.model {
            let (f, kv) = (&e.forward, &e.forward.kv);
            m = Metrics {
                waiting: b.waiting(),
                running: b.running(),
                batch_rows: b.last_rows,
                kv_blocks_used: kv.used_blocks(),
                kv_blocks: kv.n_blocks,
                kv_block: kv.block,
                summary: b.metrics.summary(),
                timings: f.timings.clone(),
                attention: Some(f.last_attention),
                timestamps: f.profiling(),
            };
        }
        send(&self.events, &*self.wake, Event::Metrics(m));
    }
}

/// Hands an event to the front end and wakes it.
fn send(events: &Sender<Event>, wake: &(dyn Fn() + Send), e: Event) {
    let _ = events.send(e);
    wake();
}

/// `f`'s output, or the message of its panic: a bug met on some input fails what the engine
/// loop was doing instead of ending the loop (its front end would wait forever). In a page a
/// panic ends the module (wasm32 does not unwind): nothing to catch there.
async fn caught<T>(f: impl Future<Output = T>) -> std::result::Result<T, String> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        use futures_util::FutureExt;
        std::panic::AssertUnwindSafe(f).catch_unwind().await.map_err(|p| {
            match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
                (Some(s), _) => s.to_string(),
                (_, Some(s)) => s.clone(),
                _ => "no message".into(),
            }
        })
    }
    #[cfg(target_arch = "wasm32")]
    {
        Ok(f.await)
    }
}

/// The model in one line, with the notice of a chat through a plain transcript where the model
/// has no chat template (the console shows this line).
fn describe(e: &Engine) -> String {
    let c = &e.forward.cfg;
    let no_template = e.tokenizer.as_ref().is_some_and(|t| !t.has_chat_template());
    format!(
        "{:?}, {} layers, hidden {}, vocab {}, {:.1} MiB of weights on {}{}",
        c.arch,
        c.layers,
        c.hidden,
        c.vocab,
        e.forward.weights.gpu_bytes() as f64 / (1 << 20) as f64,
        e.gpu.adapter_name(),
        if no_template { format!(" · {NO_TEMPLATE_NOTICE}") } else { String::new() }
    )
}
