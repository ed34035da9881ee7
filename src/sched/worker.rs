//! The engine thread. It owns the `Engine`, keeps the waiting requests, runs one at a time
//! (interactive before background; a running background request yields to a waiting
//! interactive one between tokens and resumes later), and reports tokens and metrics.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{Context, Result};

use crate::engine::{Engine, EngineOptions, Finish, Request};
use crate::gpu::profiler::Timing;
use crate::model::forward::Forward;
use crate::ops::attention::AttnKind;
use crate::sampling::SamplingParams;
use crate::tokenizer::{Message, StreamDecoder};

use super::Priority;

#[derive(Clone, Debug)]
pub struct GenRequest {
    pub id: u64,
    pub messages: Vec<Message>,
    pub sampling: SamplingParams,
    pub max_tokens: usize,
    pub priority: Priority,
}

pub enum Command {
    /// Load a model (the current one keeps serving if this fails).
    Load(PathBuf, Box<EngineOptions>),
    Submit(GenRequest),
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
}

/// A snapshot of the engine after a step.
#[derive(Clone, Debug, Default)]
pub struct Metrics {
    pub waiting: usize,
    pub running: usize,
    pub kv_used: u32,
    pub kv_slots: u32,
    /// GPU time per dispatch of the last step; empty without timestamp queries.
    pub timings: Vec<Timing>,
    pub attention: Option<AttnKind>,
    pub timestamps: bool,
}

pub enum Event {
    Loading(PathBuf),
    Loaded { path: PathBuf, description: String },
    LoadFailed { path: PathBuf, error: String },
    Started { id: u64 },
    Token { id: u64, text: String },
    Finished(RequestStats),
    Failed { id: u64, error: String },
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
                    engine: None,
                    waiting: VecDeque::new(),
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
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Waiting {
    req: GenRequest,
    since: Instant,
    /// Text already streamed before the request yielded to an interactive one.
    resumed: Option<Vec<u32>>,
}

struct EngineThread {
    commands: Receiver<Command>,
    events: Sender<Event>,
    wake: Box<dyn Fn() + Send>,
    engine: Option<Engine>,
    waiting: VecDeque<Waiting>,
    /// Model loads that arrived during a generation, applied after it.
    deferred: Vec<Command>,
}

/// What happened to the running request while commands were read.
enum Interrupt {
    None,
    Cancelled,
    Yield,
    Shutdown,
}

impl EngineThread {
    fn run(mut self) {
        loop {
            // Block only when idle.
            let cmd = if self.waiting.is_empty() || self.engine.is_none() {
                match self.commands.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                }
            } else {
                None
            };
            if let Some(c) = cmd {
                if !self.handle(c, None).1 {
                    return;
                }
                continue;
            }
            if !self.run_next() {
                return;
            }
        }
    }

    fn emit(&self, e: Event) {
        let _ = self.events.send(e);
        (self.wake)();
    }

    /// Applies a command; returns (what it means for `running`, keep going).
    fn handle(&mut self, c: Command, running: Option<(u64, Priority)>) -> (Interrupt, bool) {
        match c {
            Command::Load(..) if running.is_some() => {
                self.deferred.push(c);
                (Interrupt::None, true)
            }
            Command::Load(path, opts) => {
                self.emit(Event::Loading(path.clone()));
                // The old model keeps serving until the new one has loaded.
                match Engine::load(&path, &opts) {
                    Ok(e) => {
                        let description = describe(&e);
                        self.engine = Some(e);
                        self.emit(Event::Loaded { path, description });
                    }
                    Err(err) => self.emit(Event::LoadFailed { path, error: format!("{err:#}") }),
                }
                self.send_metrics(0);
                (Interrupt::None, true)
            }
            Command::Submit(req) => {
                let yield_now =
                    running.is_some_and(|(_, p)| p == Priority::Background) && req.priority == Priority::Interactive;
                self.waiting.push_back(Waiting { req, since: Instant::now(), resumed: None });
                self.send_metrics(usize::from(running.is_some()));
                (if yield_now { Interrupt::Yield } else { Interrupt::None }, true)
            }
            Command::Cancel(id) => {
                if running.is_some_and(|(r, _)| r == id) {
                    return (Interrupt::Cancelled, true);
                }
                self.waiting.retain(|w| w.req.id != id);
                (Interrupt::None, true)
            }
            Command::Shutdown => (Interrupt::Shutdown, false),
        }
    }

    fn send_metrics(&self, running: usize) {
        let engine = self.engine.as_ref().map(|e| (&e.forward, e.position()));
        self.emit(Event::Metrics(self.metrics(engine, running)));
    }

    /// Metrics with the forward pass and the positions the stream holds, when a model is loaded.
    fn metrics(&self, engine: Option<(&Forward, u32)>, running: usize) -> Metrics {
        let mut m = Metrics { waiting: self.waiting.len(), running, ..Default::default() };
        if let Some((f, positions)) = engine {
            m.kv_used = positions.min(f.kv.opts.context);
            m.kv_slots = f.kv.n_blocks * f.kv.block;
            m.timings = f.timings.clone();
            m.attention = Some(f.last_attention);
            m.timestamps = f.profiling();
        }
        m
    }

    /// Runs the most urgent waiting request; false when the thread should end.
    fn run_next(&mut self) -> bool {
        let Some(i) = (0..self.waiting.len()).min_by_key(|&i| (self.waiting[i].req.priority, i)) else {
            return true;
        };
        let w = self.waiting.remove(i).expect("index from the queue");
        let id = w.req.id;
        let keep_going = match self.generate(w) {
            Ok(keep_going) => keep_going,
            Err(e) => {
                self.emit(Event::Failed { id, error: format!("{e:#}") });
                true
            }
        };
        let deferred = std::mem::take(&mut self.deferred);
        deferred.into_iter().fold(keep_going, |k, c| self.handle(c, None).1 && k)
    }

    fn generate(&mut self, w: Waiting) -> Result<bool> {
        let queued_ms = w.since.elapsed().as_secs_f64() * 1e3;
        let engine = self.engine.as_mut().context("no model is loaded")?;
        let tok = engine.tokenizer.take().context("the model has no tokenizer")?;
        let prompt = tok.encode_chat(&w.req.messages);
        engine.tokenizer = Some(tok);
        let mut prompt = prompt?;
        let done_before = w.resumed.clone().unwrap_or_default();
        prompt.extend(&done_before);
        if w.resumed.is_none() {
            self.emit(Event::Started { id: w.req.id });
        }
        let req = Request {
            prompt_ids: prompt,
            max_tokens: w.req.max_tokens.saturating_sub(done_before.len()),
            sampling: w.req.sampling.clone(),
            stop_at_eos: true,
        };
        let mut stream = StreamDecoder::default();
        let mut generated = done_before.clone();
        let mut interrupt = Interrupt::None;
        let mut keep_going = true;
        // The callback runs between tokens: stream the text, read commands, publish metrics.
        let mut engine = self.engine.take().expect("checked above");
        let result = {
            let tok = engine.tokenizer.take().expect("checked above");
            let r = engine.generate_observed(&req, |token, forward| {
                generated.push(token);
                if let Ok(Some(text)) = stream.push(&tok, token) {
                    self.emit(Event::Token { id: w.req.id, text });
                }
                let positions = (req.prompt_ids.len() + generated.len() - done_before.len()) as u32;
                self.emit(Event::Metrics(self.metrics(Some((forward, positions)), 1)));
                loop {
                    match self.commands.try_recv() {
                        Ok(c) => {
                            let (i, k) = self.handle(c, Some((w.req.id, w.req.priority)));
                            keep_going &= k;
                            if !matches!(i, Interrupt::None) {
                                interrupt = i;
                            }
                        }
                        Err(TryRecvError::Empty) => break,
                        Err(TryRecvError::Disconnected) => {
                            interrupt = Interrupt::Shutdown;
                            keep_going = false;
                            break;
                        }
                    }
                }
                matches!(interrupt, Interrupt::None)
            });
            engine.tokenizer = Some(tok);
            r
        };
        self.engine = Some(engine);
        self.send_metrics(1);
        let g = result?;
        if matches!(interrupt, Interrupt::Yield) && g.finish == Finish::Stopped {
            // Back in the queue with what it has so far; interactive work goes first.
            self.waiting.push_front(Waiting { req: w.req, since: Instant::now(), resumed: Some(generated) });
            return Ok(keep_going);
        }
        self.emit(Event::Finished(RequestStats {
            id: w.req.id,
            priority: w.req.priority,
            queued_ms,
            ttft_ms: g.ttft_ms,
            decode_tok_s: g.decode_tok_s,
            tokens: generated.len(),
            finish: g.finish,
        }));
        self.send_metrics(0);
        Ok(keep_going)
    }
}

fn describe(e: &Engine) -> String {
    let c = &e.forward.cfg;
    format!(
        "{:?}, {} layers, hidden {}, vocab {}, {:.1} MiB of weights on {}",
        c.arch,
        c.layers,
        c.hidden,
        c.vocab,
        e.forward.weights.gpu_bytes() as f64 / (1 << 20) as f64,
        e.gpu.info.name
    )
}
