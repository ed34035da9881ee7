//! The server's side of the engine thread: requests go in as token ids (tokenized here, so a
//! prompt that does not fit is answered at once), and one thread reads the engine's events,
//! routing each request's text to its handler, keeping the metrics and logging one line per
//! finished request. A handler that goes away (the client disconnected) cancels its request,
//! which frees its KV memory at the engine's next turn.

use futures_channel::mpsc::UnboundedSender;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use tokio::sync::{mpsc, watch};

use super::api::{token_logprobs, ApiError, Prompt, Request};
use super::log::{Log, LogFormat, LogWriter};
use super::prometheus::Registry;
use super::stop::StopMatcher;
use crate::engine::{EngineOptions, Finish};
use crate::sampling::SamplingParams;
use crate::sched::{Command, Event, ModelSource, RequestStats, SeqRequest, TokenLogprobs, Worker};
use crate::tokenizer::TextTokenizer;

/// Whether the model can serve.
#[derive(Clone, Debug, PartialEq)]
pub enum State {
    Loading,
    Ready,
    /// Why it cannot serve, as a sentence.
    Failed(String),
}

/// What the engine thread says about one request.
enum Piece {
    /// New text (maybe empty), its token's log-probabilities when they were asked for, and
    /// the request's tokens so far.
    Text(String, Option<TokenLogprobs>, usize),
    Done(RequestStats),
    Failed(String),
}

/// What the event thread shares with the handlers.
struct Shared {
    routes: Mutex<HashMap<u64, mpsc::UnboundedSender<Piece>>>,
    metrics: Mutex<Registry>,
    state: watch::Sender<State>,
    /// The most positions one sequence may hold, once the model has loaded (a paged pool
    /// smaller than the context holds fewer); the context until then.
    positions: AtomicUsize,
}

pub struct Hub {
    shared: Arc<Shared>,
    commands: UnboundedSender<Command>,
    events: Option<JoinHandle<()>>,
    /// Writes the event thread's log lines (`serve::log`).
    log_writer: Option<LogWriter>,
    tokenizer: Arc<TextTokenizer>,
    next_id: AtomicU64,
    /// Requests the engine may hold at once, running and waiting.
    capacity: usize,
    pub model_name: String,
    pub context: usize,
    sliding_window: bool,
}

/// A submitted request as its handler sees it: text pieces with stop strings applied, then
/// the end.
pub struct Generation {
    pub id: u64,
    pub prompt_tokens: usize,
    pieces: mpsc::UnboundedReceiver<Piece>,
    commands: UnboundedSender<Command>,
    stop: StopMatcher,
    /// Once a stop string has ended the answer: the tokens it took (usage counts these, not
    /// those the engine made before the cancel reached it).
    stopped: Option<usize>,
    done: bool,
    /// The end, once the held-back text before it has gone out.
    end: Option<Out>,
    /// Names the tokens of logprobs.
    tokenizer: Arc<TextTokenizer>,
    /// Logprobs entries (`api::token_logprobs`) of tokens whose text has not gone out yet.
    logprobs: Vec<serde_json::Value>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Out {
    /// New text, and the logprobs entries of the tokens since the last (when asked for; the
    /// tokens of a stop string included).
    Text(String, Vec<serde_json::Value>),
    /// `finish_reason` and the generated tokens.
    End {
        finish: &'static str,
        tokens: usize,
    },
    Error(String),
}

/// The name a model is served as: its file's name without `.gguf`, or its folder's name.
pub fn model_name(path: &Path) -> String {
    let name = if path.is_file() { path.file_stem() } else { path.file_name() };
    name.map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// The tokenizer of a model (a GGUF file's metadata, or a folder's tokenizer.json).
fn load_tokenizer(path: &Path) -> Result<TextTokenizer> {
    if path.is_file() {
        TextTokenizer::from_gguf(&crate::model::gguf::Gguf::open(path)?)
    } else {
        anyhow::ensure!(
            path.join("tokenizer.json").exists(),
            "{} has no tokenizer.json: serving needs text",
            path.display()
        );
        TextTokenizer::from_hf_dir(path)
    }
}

impl Hub {
    /// Starts the engine thread loading `path`; requests are refused until it is loaded.
    pub fn start(path: &Path, opts: &EngineOptions, max_waiting: usize, format: LogFormat) -> Result<Hub> {
        let tokenizer = load_tokenizer(path).with_context(|| format!("loading the tokenizer of {}", path.display()))?;
        let (log, log_writer) = super::log::start(format, std::io::stderr())?;
        let worker = Worker::spawn();
        let commands = worker.commands();
        worker.send(Command::Load(ModelSource::Path(path.to_path_buf()), Box::new(opts.clone())));
        let shared = Arc::new(Shared {
            routes: Mutex::new(HashMap::new()),
            metrics: Mutex::new(Registry::default()),
            state: watch::channel(State::Loading).0,
            positions: AtomicUsize::new(opts.forward.kv.context as usize),
        });
        let events = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("wginfer-serve-events".into())
                .spawn(move || read_events(worker, &shared, &log))
                .context("spawning the event thread")?
        };
        let kv = &opts.forward.kv;
        Ok(Hub {
            shared,
            commands,
            events: Some(events),
            log_writer: Some(log_writer),
            tokenizer: Arc::new(tokenizer),
            next_id: AtomicU64::new(1),
            capacity: (kv.parallel as usize).saturating_add(max_waiting),
            model_name: model_name(path),
            context: kv.context as usize,
            sliding_window: kv.sliding_window,
        })
    }

    pub fn state(&self) -> watch::Receiver<State> {
        self.shared.state.subscribe()
    }

    pub fn metrics(&self) -> String {
        self.shared.metrics.lock().expect("metrics lock").render()
    }

    pub fn check_model(&self, model: &str) -> Result<(), ApiError> {
        if model == self.model_name {
            return Ok(());
        }
        let mut e = ApiError::new(
            404,
            "invalid_request_error",
            Some("model_not_found"),
            format!("the model {model:?} does not exist; this server has {:?}", self.model_name),
        );
        e.param = Some("model".into());
        Err(e)
    }

    /// The prompt's ids, checked (with `max_tokens`, if given) against the context; the most
    /// tokens it may generate.
    pub fn prepare(&self, prompt: &Prompt, max_tokens: Option<usize>) -> Result<(Vec<u32>, usize), ApiError> {
        let ids = match prompt {
            Prompt::Chat(m) => {
                self.tokenizer.encode_chat(m).map_err(|e| ApiError::invalid("messages", format!("{e:#}")))?
            }
            Prompt::Text(t) => {
                self.tokenizer.encode(t, true).map_err(|e| ApiError::invalid("prompt", format!("{e:#}")))?
            }
        };
        let (n, context) = (ids.len(), self.context);
        let param = if matches!(prompt, Prompt::Chat(_)) { "messages" } else { "prompt" };
        if n == 0 {
            return Err(ApiError::invalid(param, "the prompt is empty"));
        }
        if self.sliding_window {
            return Ok((ids, max_tokens.unwrap_or(context)));
        }
        // What bounds a sequence: the context, or a smaller KV pool.
        let limit = context.min(self.shared.positions.load(Ordering::Relaxed));
        let bound = match limit < context {
            true => format!("the KV pool holds {limit} positions (raise --kv-memory)"),
            false => format!("this model's context is {context} tokens"),
        };
        // OpenAI's code for these, which clients look for to shorten a conversation.
        let too_long = |param: &str, message: String| ApiError {
            code: Some("context_length_exceeded"),
            ..ApiError::invalid(param, message)
        };
        if n >= limit {
            return Err(too_long(
                param,
                format!("{bound}, and the prompt has {n} tokens (at most {} fit)", limit.saturating_sub(1)),
            ));
        }
        match max_tokens {
            Some(m) if n + m > limit => {
                Err(too_long("max_tokens", format!("{bound}: the prompt's {n} tokens and max_tokens {m} do not fit")))
            }
            Some(m) => Ok((ids, m)),
            None => Ok((ids, limit - n)),
        }
    }

    /// 503 while the queue is full (`submit` checks again as it queues).
    pub fn check_capacity(&self) -> Result<(), ApiError> {
        let queued = self.shared.routes.lock().expect("routes lock").len();
        match queued >= self.capacity {
            true => Err(busy(queued)),
            false => Ok(()),
        }
    }

    /// Queues `req` over its prompt's ids, `max_tokens` and `sampling` (the seed drawn where
    /// it gave none); 503 while the model loads or when the queue is full.
    pub fn submit(
        &self,
        req: &Request,
        prompt_ids: Vec<u32>,
        max_tokens: usize,
        sampling: SamplingParams,
    ) -> Result<Generation, ApiError> {
        let (stop, priority, logprobs) = (req.stop.clone(), req.priority, req.logprobs);
        match &*self.shared.state.borrow() {
            State::Ready => {}
            State::Loading => return Err(unavailable("the model is still loading")),
            State::Failed(e) => return Err(unavailable(e)),
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, pieces) = mpsc::unbounded_channel();
        {
            let mut routes = self.shared.routes.lock().expect("routes lock");
            if routes.len() >= self.capacity {
                return Err(busy(routes.len()));
            }
            routes.insert(id, tx);
        }
        let prompt_tokens = prompt_ids.len();
        let stop_at_eos = !req.ignore_eos;
        let req = SeqRequest { id, prompt_ids, max_tokens, sampling, stop_at_eos, priority, logprobs };
        if self.commands.unbounded_send(Command::SubmitIds(req)).is_err() {
            // The engine thread is gone (its events may already have cleared the routes).
            self.shared.routes.lock().expect("routes lock").remove(&id);
            return Err(unavailable("the engine thread stopped"));
        }
        Ok(Generation {
            id,
            prompt_tokens,
            pieces,
            commands: self.commands.clone(),
            stop: StopMatcher::new(stop),
            stopped: None,
            done: false,
            end: None,
            tokenizer: self.tokenizer.clone(),
            logprobs: Vec::new(),
        })
    }
}

/// 503: the queue holds `queued` requests, as many as it takes.
fn busy(queued: usize) -> ApiError {
    unavailable(&format!("the server is busy ({queued} requests queued or running)"))
}

/// A 503: the client should try again later (the handler adds `Retry-After`).
pub fn unavailable(message: &str) -> ApiError {
    ApiError::new(503, "server_error", Some("unavailable"), message)
}

impl Drop for Hub {
    /// Ends the engine thread (after the step it is in) and the event thread with it, then
    /// gives the log's last lines a moment to go out.
    fn drop(&mut self) {
        let _ = self.commands.unbounded_send(Command::Shutdown);
        if let Some(t) = self.events.take() {
            let _ = t.join();
        }
        if let Some(w) = self.log_writer.take() {
            w.flush();
        }
    }
}

/// Routes the engine's events until it ends.
fn read_events(worker: Worker, shared: &Shared, log: &Log) {
    let route = |id: u64, piece: Piece, last: bool| {
        let mut routes = shared.routes.lock().expect("routes lock");
        if let Some(tx) = routes.get(&id) {
            let _ = tx.send(piece);
        }
        if last {
            routes.remove(&id);
        }
    };
    while let Ok(event) = worker.events.recv() {
        match event {
            Event::Loaded { description, positions, .. } => {
                log.line(format!("model loaded: {description}"), serde_json::json!({"loaded": description}));
                shared.positions.store(positions, Ordering::Relaxed);
                shared.state.send_replace(State::Ready);
            }
            Event::LoadFailed { error, .. } => {
                shared.state.send_replace(State::Failed(format!("the model failed to load: {error}")));
            }
            Event::Token { id, text, logprobs, tokens } => route(id, Piece::Text(text, logprobs, tokens), false),
            // Logging only queues the line (`serve::log`): the client's end does not wait on it.
            Event::Finished(s) => {
                shared.metrics.lock().expect("metrics lock").finished(&s);
                log_request(&s, log);
                route(s.id, Piece::Done(s), true);
            }
            Event::Failed { id, error } => {
                shared.metrics.lock().expect("metrics lock").failed();
                log.line(format!("request {id} failed: {error}"), serde_json::json!({"request": id, "error": error}));
                route(id, Piece::Failed(error), true);
            }
            Event::Metrics(m) => shared.metrics.lock().expect("metrics lock").engine(m),
            Event::Loading { .. } | Event::Started { .. } => {}
        }
    }
    // The engine thread is gone (it panicked, or was shut down): handlers still waiting get an
    // error rather than wait forever.
    shared.routes.lock().expect("routes lock").clear();
    if *shared.state.borrow() == State::Ready {
        shared.state.send_replace(State::Failed("the engine thread stopped".into()));
    }
}

fn log_request(s: &RequestStats, log: &Log) {
    let finish = format!("{:?}", s.finish).to_lowercase();
    let priority = format!("{:?}", s.priority).to_lowercase();
    let text = format!(
        "request {} {priority}: {} prompt + {} answer tokens, TTFT {:.0} ms, {:.1} tok/s, finish {finish}",
        s.id, s.prompt_tokens, s.tokens, s.ttft_ms, s.decode_tok_s
    );
    let json = serde_json::json!({"request": s.id, "priority": priority, "prompt_tokens": s.prompt_tokens,
        "tokens": s.tokens, "ttft_ms": s.ttft_ms, "decode_tok_s": s.decode_tok_s, "finish": finish});
    log.line(text, json);
}

impl Generation {
    /// The next text (stop strings cut), then the end; `None` after the end.
    pub async fn next(&mut self) -> Option<Out> {
        if let Some(end) = self.end.take() {
            return Some(end);
        }
        while !self.done {
            let piece = self.pieces.recv().await;
            match piece {
                Some(Piece::Text(..)) if self.stopped.is_some() => {}
                Some(Piece::Text(t, logprobs, tokens)) => {
                    self.logprobs.extend(logprobs.map(|lp| token_logprobs(&self.tokenizer, &lp)));
                    let (text, hit) = self.stop.push(&t);
                    if hit {
                        // The rest is not wanted: stop it now, the end comes with its stats.
                        self.stopped = Some(tokens);
                        let _ = self.commands.unbounded_send(Command::Cancel(self.id));
                    }
                    if !text.is_empty() {
                        return Some(Out::Text(text, std::mem::take(&mut self.logprobs)));
                    }
                }
                Some(Piece::Done(s)) => {
                    self.done = true;
                    let finish = match s.finish {
                        Finish::Length | Finish::ContextFull if self.stopped.is_none() => "length",
                        _ => "stop",
                    };
                    let end = Out::End { finish, tokens: self.stopped.unwrap_or(s.tokens) };
                    let rest = self.stop.finish();
                    if rest.is_empty() && self.logprobs.is_empty() {
                        return Some(end);
                    }
                    self.end = Some(end);
                    return Some(Out::Text(rest, std::mem::take(&mut self.logprobs)));
                }
                Some(Piece::Failed(e)) => {
                    self.done = true;
                    return Some(Out::Error(e));
                }
                None => {
                    self.done = true;
                    return Some(Out::Error("the engine stopped".into()));
                }
            }
        }
        None
    }
}

impl Drop for Generation {
    /// A generation dropped before its end (the client went away) is cancelled.
    fn drop(&mut self) {
        if !self.done {
            let _ = self.commands.unbounded_send(Command::Cancel(self.id));
        }
    }
}
