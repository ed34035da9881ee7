//! `wginfer batch`: a file of requests (JSON lines) through the continuous batcher, answers in
//! input order as JSON lines. A bad line is reported with its number and the rest still run.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{Context, Result};
use clap::Args;
use serde::Deserialize;
use serde_json::json;

use super::{ModelArgs, SamplingArgs, Truncate};
use crate::engine::Engine;
use crate::sched::{BatchOptions, Batcher, Priority, SeqEvent, SeqRequest, SeqStats};
use crate::tokenizer::{Message, TextTokenizer};

#[derive(Args, Debug)]
pub struct BatchArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Defaults for lines that do not set their own (the seed: line i uses seed + i).
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Requests, one JSON object per line: {"prompt": "..."}, {"messages": [...]} (chat
    /// template) or {"prompt_ids": [...]}, with optional max_tokens, temperature, top_p, top_k,
    /// seed, repetition_penalty, priority ("interactive" or "background").
    #[arg(long)]
    input: PathBuf,
    /// Where the answers go (default: stdout).
    #[arg(long)]
    output: Option<PathBuf>,
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    /// Most tokens in one step (decode rows and prompt chunks together).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    max_batch_tokens: u32,
    /// Prompts longer than the context: `left` keeps their end (see `Truncate`).
    #[arg(long, value_enum)]
    truncate: Option<Truncate>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    prompt: Option<String>,
    messages: Option<Vec<LineMessage>>,
    prompt_ids: Option<Vec<u32>>,
    max_tokens: Option<usize>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    top_k: Option<usize>,
    seed: Option<u64>,
    repetition_penalty: Option<f32>,
    priority: Option<Priority>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LineMessage {
    role: String,
    content: String,
}

/// One input line as a request, or why it cannot be one.
fn parse(text: &str, index: usize, a: &BatchArgs, tok: Option<&TextTokenizer>, context: usize) -> Result<SeqRequest> {
    let line: Line = serde_json::from_str(text)?;
    let tok = || tok.context("the model has no tokenizer: give prompt_ids");
    let prompt_ids = match (line.prompt, line.messages, line.prompt_ids) {
        (Some(p), None, None) => tok()?.encode(&p, true)?,
        (None, Some(m), None) => {
            let msgs: Vec<Message> = m.iter().map(|m| Message::new(&m.role, &m.content)).collect();
            tok()?.encode_chat(&msgs)?
        }
        (None, None, Some(ids)) => ids,
        _ => anyhow::bail!("give exactly one of \"prompt\", \"messages\" and \"prompt_ids\""),
    };
    let d = a.sampling.params();
    let sampling = crate::sampling::SamplingParams {
        temperature: line.temperature.unwrap_or(d.temperature),
        top_k: line.top_k.unwrap_or(d.top_k),
        top_p: line.top_p.unwrap_or(d.top_p),
        repetition_penalty: line.repetition_penalty.unwrap_or(d.repetition_penalty),
        seed: line.seed.unwrap_or(d.seed.wrapping_add(index as u64)),
    };
    sampling.check().map_err(anyhow::Error::msg)?;
    let max_tokens = line.max_tokens.unwrap_or(a.max_tokens);
    let mut prompt_ids = prompt_ids;
    Truncate::apply(a.truncate, &mut prompt_ids, context, max_tokens, &format!("line {}", index + 1));
    Ok(SeqRequest {
        id: index as u64,
        prompt_ids,
        max_tokens,
        sampling,
        stop_at_eos: true,
        priority: line.priority.unwrap_or(Priority::Interactive),
        logprobs: None,
    })
}

/// The input's lines: a line that is not UTF-8 is an error of its own (it is reported with
/// its number; the others run); a byte-order mark before the first is dropped.
fn read_lines(path: &Path) -> Result<Vec<Result<String, String>>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let bytes = bytes.strip_prefix("\u{feff}".as_bytes()).unwrap_or(&bytes);
    let lines = bytes.split(|&b| b == b'\n').map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let text = |l: &[u8]| String::from_utf8(l.to_vec()).map_err(|e| format!("not UTF-8 text ({})", e.utf8_error()));
    let mut lines: Vec<_> = lines.map(text).collect();
    if lines.last().is_some_and(|l| l.as_ref().is_ok_and(String::is_empty)) {
        lines.pop();
    }
    Ok(lines)
}

/// The output file, opened before the model loads (so a path that cannot be written fails at
/// once) without touching what it holds: a model that fails to load leaves an earlier run's
/// answers in place. Opened once, so a FIFO's reader sees one writer.
struct Output {
    file: std::fs::File,
    path: PathBuf,
    /// The run made the file: a failed load removes it again.
    created: bool,
}

/// Opens `--output`, never the input file or the model's (by path, link or hard link), which
/// writing would destroy.
fn claim_output(a: &BatchArgs, model: &Path) -> Result<Option<Output>> {
    let Some(p) = &a.output else { return Ok(None) };
    if same_file(p, &a.input) {
        anyhow::bail!("--output {} is the input file: the answers would overwrite the requests", p.display());
    }
    // A folder's model files: the weights, configuration, tokenizer and chat template it reads.
    let model_files: Vec<PathBuf> = match model.is_dir() {
        true => std::fs::read_dir(model)
            .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).filter(|f| is_model_file(f)).collect())
            .unwrap_or_default(),
        false => vec![model.to_path_buf()],
    };
    if model_files.iter().any(|f| same_file(p, f)) {
        anyhow::bail!(
            "--output {} is a file of the model {}: the answers would overwrite it",
            p.display(),
            model.display()
        );
    }
    let created = !p.exists();
    let file = std::fs::OpenOptions::new().write(true).create(true).truncate(false).open(p);
    let file = file.with_context(|| format!("cannot write {}", p.display()))?;
    Ok(Some(Output { file, path: p.clone(), created }))
}

/// A file of a Hugging Face folder that loading the model reads.
fn is_model_file(f: &Path) -> bool {
    let name = f.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let read =
        ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"];
    read.contains(&name) || name.ends_with(".safetensors") || name.ends_with(".safetensors.index.json")
}

/// `a` and `b` are one file: the same device and inode where there are such, else the same
/// canonical path.
fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let id = |p: &Path| std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()));
        id(a).is_some() && id(a) == id(b)
    }
    #[cfg(not(unix))]
    {
        let path = |p: &Path| std::fs::canonicalize(p).ok();
        path(a).is_some() && path(a) == path(b)
    }
}

/// The output, emptied now that the model has loaded, and its name for errors.
fn open_output(output: Option<Output>) -> Result<(Box<dyn Write>, String)> {
    let Some(Output { file, path, .. }) = output else {
        return Ok((Box::new(std::io::stdout().lock()), "stdout".into()));
    };
    // A regular file is emptied; a pipe or a device (a FIFO, /dev/null) has nothing to empty.
    if file.metadata().is_ok_and(|m| m.is_file()) {
        file.set_len(0).with_context(|| format!("emptying {}", path.display()))?;
    }
    Ok((Box::new(std::io::BufWriter::new(file)), path.display().to_string()))
}

/// Set by the first SIGINT (Ctrl-C) or SIGTERM: the run stops after its step, and the finished
/// answers are still written; a second one ends the process at once.
fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let set = flag.clone();
    let watch = move || {
        let Ok(rt) = tokio::runtime::Builder::new_current_thread().enable_all().build() else { return };
        rt.block_on(async {
            let message = "\ninterrupted: writing the finished answers (a second Ctrl-C or SIGTERM quits at once)";
            super::interrupt::first_signal(message, || set.store(true, Ordering::Relaxed)).await;
            // The runtime stays, for the second signal's task.
            std::future::pending::<()>().await
        });
    };
    // Without the thread Ctrl-C ends the process as it always did.
    let _ = std::thread::Builder::new().name("wginfer-batch-sigint".into()).spawn(watch);
    flag
}

/// Answers by input line, written in input order as soon as every earlier one is.
struct Answers {
    out: Box<dyn Write>,
    /// The output's name, for its write errors.
    name: String,
    /// The request lines (blank lines are none), in order, and how many are written.
    lines: Vec<usize>,
    written: usize,
    done: BTreeMap<usize, serde_json::Value>,
}

impl Answers {
    fn put(&mut self, line: usize, v: serde_json::Value) -> Result<()> {
        self.done.insert(line, v);
        while let Some(v) = self.lines.get(self.written).and_then(|i| self.done.remove(i)) {
            writeln!(self.out, "{v}").with_context(|| format!("writing {}", self.name))?;
            self.written += 1;
        }
        self.out.flush().with_context(|| format!("writing {}", self.name))
    }

    /// After a failure that ends the run: every line not yet written, its answer if it has one,
    /// else the failure, so that no finished answer is lost.
    fn close_after(&mut self, error: &anyhow::Error) -> Result<()> {
        for &i in &self.lines[self.written..] {
            let v = self.done.remove(&i).unwrap_or_else(|| json!({"index": i, "error": format!("not run: {error:#}")}));
            writeln!(self.out, "{v}").with_context(|| format!("writing {}", self.name))?;
        }
        self.written = self.lines.len();
        self.out.flush().with_context(|| format!("writing {}", self.name))
    }
}

pub fn run(a: &BatchArgs) -> Result<()> {
    let lines = read_lines(&a.input)?;
    let model = a.model.model_path()?;
    let mut opts = a.model.engine_options()?;
    let output = claim_output(a, &model)?;
    // Steps as large as asked for (the engine's buffers are sized for its largest step).
    opts.forward.max_rows = opts.forward.max_rows.max(a.max_batch_tokens);
    let mut engine = match Engine::load(&model, &opts) {
        Ok(engine) => engine,
        Err(e) => {
            if let Some(o) = output.filter(|o| o.created) {
                let _ = std::fs::remove_file(&o.path);
            }
            return Err(e);
        }
    };
    let batch = BatchOptions { max_batch_tokens: a.max_batch_tokens, ..BatchOptions::for_adapter(&engine.gpu.caps) };
    let tok = engine.tokenizer.take();
    // What one sequence may hold (--truncate's bound): the context, or a smaller paged pool.
    let context = engine.forward.kv.sequence_positions() as usize;
    let mut batcher = Batcher::new(&mut engine, batch);
    let requests: Vec<usize> =
        (0..lines.len()).filter(|&i| lines[i].as_ref().map_or(true, |l| !l.trim().is_empty())).collect();
    let (out, name) = open_output(output)?;
    // From here Ctrl-C keeps the answers (before, during the load, it ends the process at once).
    let interrupted = interrupt_flag();
    let mut answers = Answers { out, name, lines: requests.clone(), written: 0, done: BTreeMap::new() };
    let mut prompts: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let bar = indicatif::ProgressBar::new(requests.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} requests, {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    let bad_line = |answers: &mut Answers, i: usize, error: String| {
        eprintln!("{}: line {}: {error}", a.input.display(), i + 1);
        bar.inc(1);
        answers.put(i, json!({"index": i, "error": format!("line {}: {error}", i + 1)}))
    };
    for &i in &requests {
        let parsed = lines[i].as_ref().map_err(|e| anyhow::anyhow!("{e}"));
        match parsed.and_then(|l| parse(l, i, a, tok.as_ref(), context)) {
            Ok(req) => {
                prompts.insert(req.id, req.prompt_ids.clone());
                batcher.submit(req);
            }
            Err(e) => bad_line(&mut answers, i, format!("{e:#}"))?,
        }
    }
    let mut ids: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut on_event = |answers: &mut Answers, ev: SeqEvent| -> Result<()> {
        match ev {
            SeqEvent::Token { id, token, .. } => ids.entry(id).or_default().push(token),
            SeqEvent::Finished(s) => {
                let got = ids.remove(&s.id).unwrap_or_default();
                let text = tok.as_ref().map(|t| t.decode(&got)).transpose()?.unwrap_or_default();
                answers.put(s.id as usize, answer(&s, &prompts[&s.id], &got, &text))?;
                bar.inc(1);
            }
            SeqEvent::Failed { id, error } => {
                // The batcher names the request by its id, here the line's index.
                let error = error.strip_prefix(&format!("request {id}: ")).unwrap_or(&error).to_string();
                bad_line(answers, id as usize, error)?
            }
        }
        Ok(())
    };
    let mut run_all = |answers: &mut Answers| -> Result<()> {
        while !batcher.is_idle() {
            if interrupted.load(Ordering::Relaxed) {
                anyhow::bail!("interrupted (Ctrl-C or SIGTERM)");
            }
            let events = match batcher.step(&mut engine) {
                Ok(events) => events,
                Err(e) => {
                    // What the failed step finished before it failed is still answered.
                    for ev in batcher.take_held() {
                        on_event(answers, ev)?;
                    }
                    return Err(e);
                }
            };
            for ev in events {
                on_event(answers, ev)?;
            }
            bar.set_message(format!("{:.0} tok/s", batcher.metrics.summary().tokens_per_s));
        }
        Ok(())
    };
    if let Err(e) = run_all(&mut answers) {
        bar.finish_and_clear();
        answers.close_after(&e)?;
        return Err(e);
    }
    bar.finish_and_clear();
    let s = batcher.metrics.summary();
    eprintln!(
        "{} requests, {} tokens in {:.1} s: {:.2} requests/s, {:.0} tok/s; TTFT P50 {:.0} ms, P99 {:.0} ms",
        s.requests,
        s.tokens,
        s.requests as f64 / s.requests_per_s.max(1e-9),
        s.requests_per_s,
        s.tokens_per_s,
        s.ttft_ms.p50,
        s.ttft_ms.p99
    );
    Ok(())
}

fn answer(s: &SeqStats, prompt: &[u32], ids: &[u32], text: &str) -> serde_json::Value {
    json!({"index": s.id, "prompt_ids": prompt, "ids": ids, "text": text,
        "finish": format!("{:?}", s.finish).to_lowercase(), "ttft_ms": s.ttft_ms, "tokens": ids.len()})
}
