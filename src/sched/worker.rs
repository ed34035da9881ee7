//! The engine thread. It owns the `Engine` and a continuous batcher: requests (chat messages)
//! are tokenized as they arrive and joined to the running batch at the next step; every step
//! streams each request's new text, and metrics follow. Interactive requests are admitted and
//! planned first (`batch.rs`); a cancelled request frees its memory at once.

use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};

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

pub enum Command {
    /// Load a model (the current one keeps serving if this fails); applied once the running
    /// requests have finished.
    Load(PathBuf, Box<EngineOptions>),
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

pub enum Event {
    Loading(PathBuf),
    Loaded {
        path: PathBuf,
        description: String,
    },
    LoadFailed {
        path: PathBuf,
        error: String,
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
    },
    Finished(RequestStats),
    Failed {
        id: u64,
        error: String,
    },
    Metrics(Metrics),
}

/// Handle to the engine thread.
pub struct Worker {
    tx: Sender<Command>,
    pub events: Receiver<Event>,
    thread: Option<JoinHandle<()>>,
}

impl Worker {
    pub fn spawn() -> Worker {
        Self::spawn_with_waker(|| {})
    }

    /// Like `spawn`; `wake` runs after every event (a UI asks for a repaint there).
    pub fn spawn_with_waker(wake: impl Fn() + Send + 'static) -> Worker {
        let (tx, commands) = channel();
        let (events_tx, events) = channel();
        let thread = std::thread::Builder::new()
            .name("wginfer-engine".into())
            .spawn(move || {
                EngineThread {
                    commands,
                    events: events_tx,
                    wake: Box::new(wake),
                    model: None,
                    streams: HashMap::new(),
                    deferred: Vec::new(),
                }
                .run()
            })
            .expect("spawning the engine thread");
        Worker { tx, events, thread: Some(thread) }
    }

    pub fn send(&self, c: Command) {
        let _ = self.tx.send(c);
    }

    /// A sender of commands for other threads (the server's handlers), while one thread reads
    /// the events.
    pub fn commands(&self) -> Sender<Command> {
        self.tx.clone()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct EngineThread {
    commands: Receiver<Command>,
    events: Sender<Event>,
    wake: Box<dyn Fn() + Send>,
    model: Option<(Engine, Batcher)>,
    /// The text decoder of each request that has produced a token.
    streams: HashMap<u64, StreamDecoder>,
    /// Model loads that arrived while requests ran, applied when none is left.
    deferred: Vec<Command>,
}

impl EngineThread {
    fn run(mut self) {
        loop {
            let busy = self.busy();
            // Block only when idle; otherwise take what has arrived and run a step.
            let next = match busy {
                false => self.commands.recv().map_err(|_| TryRecvError::Disconnected),
                true => self.commands.try_recv(),
            };
            match next {
                Ok(c) => {
                    if !self.handle(c) {
                        return;
                    }
                    continue;
                }
                Err(TryRecvError::Disconnected) if !busy => return,
                Err(_) => {}
            }
            if busy {
                match catch(|| self.step()) {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        self.fail_all(&format!("{e:#}"));
                        self.unload_if_lost();
                    }
                    Err(panic) => self.unload_after_panic(&panic),
                }
            }
            if !self.busy() {
                for c in std::mem::take(&mut self.deferred) {
                    self.handle(c);
                }
            }
        }
    }

    /// Whether requests are waiting or running.
    fn busy(&self) -> bool {
        self.model.as_ref().is_some_and(|(_, b)| !b.is_idle())
    }

    fn emit(&self, e: Event) {
        let _ = self.events.send(e);
        (self.wake)();
    }

    /// Applies a command; false when the thread should end.
    fn handle(&mut self, c: Command) -> bool {
        match c {
            Command::Load(..) if self.busy() => self.deferred.push(c),
            Command::Load(path, opts) => {
                self.emit(Event::Loading(path.clone()));
                let loaded = catch(|| Engine::load(&path, &opts));
                match loaded.unwrap_or_else(|p| Err(anyhow!("the loader panicked: {p}"))) {
                    Ok(mut e) => {
                        let description = describe(&e);
                        let b = Batcher::new(&mut e, BatchOptions::default());
                        self.model = Some((e, b));
                        self.emit(Event::Loaded { path, description });
                    }
                    Err(err) => self.emit(Event::LoadFailed { path, error: format!("{err:#}") }),
                }
                self.send_metrics();
            }
            Command::Submit(req) => {
                if let Err(e) = catch(|| self.submit(&req)).unwrap_or_else(|p| Err(anyhow!("panicked: {p}"))) {
                    self.emit(Event::Failed { id: req.id, error: format!("{e:#}") });
                }
                self.send_metrics();
            }
            Command::SubmitIds(req) => {
                match self.model.as_mut() {
                    Some((_, batcher)) => batcher.submit(req),
                    None => self.emit(Event::Failed { id: req.id, error: "no model is loaded".into() }),
                }
                self.send_metrics();
            }
            Command::Cancel(id) => {
                if let Some((e, b)) = self.model.as_mut() {
                    if let Some(s) = b.cancel(e, id) {
                        self.streams.remove(&id);
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
    fn step(&mut self) -> Result<()> {
        let (engine, batcher) = self.model.as_mut().expect("busy means loaded");
        let events = batcher.step(engine)?;
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
                        out.push(Event::Token { id, text: text.unwrap_or_default(), logprobs });
                    }
                }
                SeqEvent::Finished(s) => {
                    if let Some(stream) = self.streams.remove(&s.id) {
                        let text = stream.finish(tok)?;
                        if !text.is_empty() {
                            out.push(Event::Token { id: s.id, text, logprobs: None });
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
        self.send_metrics();
        Ok(())
    }

    /// A step failed on the GPU: every request ends with the error, the model stays loaded.
    fn fail_all(&mut self, error: &str) {
        let Some((engine, batcher)) = self.model.as_mut() else { return };
        let ids = batcher.ids();
        for &id in &ids {
            batcher.cancel(engine, id);
        }
        for id in ids {
            self.streams.remove(&id);
            self.emit(Event::Failed { id, error: error.to_string() });
        }
    }

    /// After a failed step: a lost device cannot run the model again, so it is dropped and the
    /// front end told, as a failed load, that it can load it again (on a new device).
    fn unload_if_lost(&mut self) {
        let Some(why) = self.model.as_ref().and_then(|(e, _)| e.gpu.lost()) else { return };
        if let Some((engine, _)) = self.model.take() {
            let error = format!("the GPU device was lost ({why}); the model was unloaded, load it again");
            self.emit(Event::LoadFailed { path: engine.model_path.clone(), error });
        }
        self.send_metrics();
    }

    /// A step panicked: the batcher and the engine may be half-way through it, so every
    /// request fails without touching them, and the model is dropped (the front end can load
    /// it again).
    fn unload_after_panic(&mut self, panic: &str) {
        let error = format!("the engine panicked ({panic}); the model was unloaded, load it again");
        let ids = self.model.take().map_or_else(Vec::new, |(_, b)| b.ids());
        for id in ids {
            self.streams.remove(&id);
            self.emit(Event::Failed { id, error: error.clone() });
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
        self.emit(Event::Metrics(m));
    }
}

/// `f`'s value, or the message of its panic: a bug met on some input fails what the engine
/// thread was doing instead of ending the thread (its front end would wait forever).
fn catch<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
        (Some(s), _) => s.to_string(),
        (_, Some(s)) => s.clone(),
        _ => "no message".into(),
    })
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
        e.gpu.info.name,
        if no_template { format!(" · {NO_TEMPLATE_NOTICE}") } else { String::new() }
    )
}
