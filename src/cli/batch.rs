//! `wginfer batch`: a file of requests (JSON lines) through the continuous batcher, answers in
//! input order as JSON lines. A bad line is reported with its number and the rest still run.

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::PathBuf;

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

pub fn run(a: &BatchArgs) -> Result<()> {
    let input = std::fs::File::open(&a.input).with_context(|| format!("reading {}", a.input.display()))?;
    let lines: Vec<String> = std::io::BufReader::new(input)
        .lines()
        .collect::<std::io::Result<_>>()
        .with_context(|| format!("reading {}", a.input.display()))?;
    let mut engine = Engine::load(&a.model.model_path()?, &a.model.engine_options())?;
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?),
        None => Box::new(std::io::stdout().lock()),
    };
    let opts = BatchOptions { max_batch_tokens: a.max_batch_tokens, ..BatchOptions::for_adapter(&engine.gpu.caps) };
    let tok = engine.tokenizer.take();
    let context = engine.forward.kv.opts.context as usize;
    let mut batcher = Batcher::new(&mut engine, opts);
    // Answers by index, written in input order as soon as every earlier one is written.
    let mut done: BTreeMap<usize, serde_json::Value> = BTreeMap::new();
    let mut prompts: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut ids: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let requests: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| !l.trim().is_empty()).map(|(i, _)| i).collect();
    for &i in &requests {
        match parse(&lines[i], i, a, tok.as_ref(), context) {
            Ok(req) => {
                prompts.insert(req.id, req.prompt_ids.clone());
                batcher.submit(req);
            }
            Err(e) => {
                eprintln!("{}: line {}: {e:#}", a.input.display(), i + 1);
                done.insert(i, json!({"index": i, "error": format!("line {}: {e:#}", i + 1)}));
            }
        }
    }
    let bar = indicatif::ProgressBar::new(requests.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} requests, {msg} [{elapsed}]")
            .expect("a valid template"),
    );
    bar.inc(done.len() as u64);
    let mut next = 0;
    while !batcher.is_idle() {
        for ev in batcher.step(&mut engine)? {
            match ev {
                SeqEvent::Token { id, token, .. } => ids.entry(id).or_default().push(token),
                SeqEvent::Finished(s) => {
                    let got = ids.remove(&s.id).unwrap_or_default();
                    let text = tok.as_ref().map(|t| t.decode(&got)).transpose()?.unwrap_or_default();
                    done.insert(s.id as usize, answer(&s, &prompts[&s.id], &got, &text));
                    bar.inc(1);
                }
                SeqEvent::Failed { id, error } => {
                    eprintln!("{}: line {}: {error}", a.input.display(), id + 1);
                    done.insert(id as usize, json!({"index": id, "error": error}));
                    bar.inc(1);
                }
            }
        }
        bar.set_message(format!("{:.0} tok/s", batcher.metrics.summary().tokens_per_s));
        // Every answer up to the first missing one, in input order.
        while let Some(v) = requests.get(next).and_then(|i| done.remove(i)) {
            writeln!(out, "{v}")?;
            next += 1;
        }
    }
    bar.finish_and_clear();
    // Lines that failed to parse after the last request that ran.
    while let Some(v) = requests.get(next).and_then(|i| done.remove(i)) {
        writeln!(out, "{v}")?;
        next += 1;
    }
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
