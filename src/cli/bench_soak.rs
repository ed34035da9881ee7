//! `wginfer bench soak`: many requests through the continuous batcher, as a long-running server
//! sees them: random prompt and answer lengths, priorities and sampling, some cancelled while
//! they wait or run, `--clients` always in flight (closed loop). After a warm-up at the largest
//! shapes it records the GPU buffers created and their bytes, the process RSS and thread count,
//! and again at the end; it fails when any of them changed (RSS: grew past `--rss-growth`), or
//! when the requests/s of the last 10% of requests fell below `--min-rate` of the first 10%'s:
//! a leak or a per-request allocation shows up as one of these.

use std::collections::HashMap;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::Args;
use serde_json::json;

use super::bench::ModelChoice;
use crate::engine::{Engine, EngineOptions, Finish};
use crate::gpu::GpuOptions;
use crate::kv::{KvLayout, KvOptions};
use crate::model::forward::ForwardOptions;
use crate::sampling::SamplingParams;
use crate::sched::{BatchOptions, Batcher, Priority, SeqEvent, SeqRequest};

#[derive(Args, Debug)]
pub(super) struct SoakArgs {
    #[command(flatten)]
    model: ModelChoice,
    /// Requests in all (after the warm-up).
    #[arg(long, default_value_t = 10_000)]
    requests: usize,
    /// Requests kept in flight at once.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    clients: u32,
    /// Prompt lengths are uniform in 1..=this many tokens.
    #[arg(long, default_value_t = 256)]
    prompt_max: usize,
    /// Answer lengths are uniform in 1..=this many tokens.
    #[arg(long, default_value_t = 64)]
    answer_max: usize,
    /// Percent of requests cancelled a random number of steps after they are sent.
    #[arg(long, default_value_t = 10)]
    cancel_percent: u64,
    /// Percent of requests of background priority.
    #[arg(long, default_value_t = 30)]
    background_percent: u64,
    /// Seed of the random requests.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    max_batch_tokens: u32,
    /// Report every Nth finished greedy request (prompt and ids) in the JSON, to check against
    /// the same request run alone; 0: none.
    #[arg(long, default_value_t = 0)]
    sample_every: usize,
    /// Most RSS growth allowed, in percent of the start's.
    #[arg(long, default_value_t = 5.0)]
    rss_growth: f64,
    /// Least requests/s of the last 10% of requests, in percent of the first 10%'s.
    #[arg(long, default_value_t = 90.0)]
    min_rate: f64,
    #[arg(long)]
    json: bool,
    #[arg(long)]
    adapter: Option<usize>,
}

/// The engine's and the process's resources at one moment.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
struct Snapshot {
    gpu_buffers: u64,
    gpu_bytes: u64,
    rss_kib: u64,
    threads: u64,
}

impl Snapshot {
    fn take(engine: &Engine) -> Result<Snapshot> {
        let status = std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
        let field = |name: &str| -> Result<u64> {
            let line = status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .with_context(|| format!("no {name} in /proc/self/status"))?;
            let number = line.trim().trim_end_matches("kB").trim();
            number.parse().with_context(|| format!("{name} {number:?} in /proc/self/status"))
        };
        Ok(Snapshot {
            gpu_buffers: engine.gpu.buffers_created(),
            gpu_bytes: engine.gpu.bytes_allocated(),
            rss_kib: field("VmRSS:")?,
            threads: field("Threads:")?,
        })
    }
}

/// xorshift64*: reproducible random requests without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in 1..=max (max at least 1).
    fn upto(&mut self, max: usize) -> usize {
        1 + (self.next() % max as u64) as usize
    }

    fn percent(&mut self, p: u64) -> bool {
        self.next() % 100 < p
    }
}

/// Greedy, sampled on the GPU, or with a repetition penalty (sampled on the host).
fn sampling(kind: u64, seed: u64) -> SamplingParams {
    match kind {
        0 => SamplingParams::default(),
        1 => SamplingParams { temperature: 0.8, top_k: 40, top_p: 0.95, seed, ..Default::default() },
        _ => SamplingParams { temperature: 0.8, repetition_penalty: 1.1, seed, ..Default::default() },
    }
}

/// Requests/s over `count` completions between two instants.
fn rate(count: usize, from: Instant, to: Instant) -> f64 {
    count as f64 / to.duration_since(from).as_secs_f64().max(1e-9)
}

pub(super) fn run(a: &SoakArgs) -> Result<()> {
    ensure!(a.requests >= 10, "--requests must be at least 10 (its first and last 10% are compared)");
    ensure!(a.prompt_max > 0 && a.answer_max > 0, "--prompt-max and --answer-max must be positive");
    ensure!(a.cancel_percent <= 100 && a.background_percent <= 100, "percents are at most 100");
    let context = super::bench::bench_context(&[a.prompt_max, a.answer_max])?;
    let kv = KvOptions { layout: KvLayout::Paged, context, parallel: a.clients, ..Default::default() };
    let forward = ForwardOptions { kv, max_rows: a.max_batch_tokens.max(a.clients), ..Default::default() };
    let opts = EngineOptions { gpu: GpuOptions { adapter: a.adapter, ..Default::default() }, forward };
    let (mut engine, label) = a.model.engine(&opts)?;
    let batch = BatchOptions { max_batch_tokens: a.max_batch_tokens, ..BatchOptions::for_adapter(&engine.gpu.caps) };
    let mut batcher = Batcher::new(&mut engine, batch);
    let mut clients = Clients {
        rng: Rng(a.seed.max(1)),
        vocab: engine.forward.cfg.vocab as u64,
        cancel_at: HashMap::new(),
        greedy: HashMap::new(),
    };

    // Warm-up: every client at the largest prompt and answer, once per kind of sampling, so
    // every pipeline and buffer a step of the soak can need exists before the start snapshot.
    for kind in 0..3 {
        for c in 0..u64::from(a.clients) {
            let id = u64::MAX - kind * 1_000_000 - c;
            let p = clients.prompt(a.prompt_max);
            batcher.submit(request(id, p, a.answer_max, sampling(kind, id), Priority::Interactive));
        }
        while !batcher.is_idle() {
            for ev in batcher.step(&mut engine)? {
                if let SeqEvent::Failed { id, error } = ev {
                    bail!("warm-up request {id}: {error}");
                }
            }
        }
    }
    let start = Snapshot::take(&engine)?;

    let n = a.requests;
    let tenth = n / 10;
    let t0 = Instant::now();
    // Completion instants that bound the first and last tenth.
    let (mut first_end, mut last_from, mut last_end) = (t0, t0, t0);
    let (mut submitted, mut done, mut cancelled, mut step) = (0, 0, 0, 0u64);
    // The first and the last tenth send the same requests (the same random draws), so their
    // rates differ by what the engine became, not by their mix of lengths: with random
    // lengths alone, 200 requests of 2000 ran 25% faster or slower than another 200.
    clients.rng = Rng(a.seed.max(1));
    let (mut greedy_done, mut samples) = (0usize, Vec::new());
    while submitted < (a.clients as usize).min(n) {
        clients.send(a, &mut batcher, submitted as u64, step);
        submitted += 1;
    }
    while done < n {
        // Requests that ended in this round (finished or cancelled).
        let mut ended = 0;
        let due: Vec<u64> = clients.cancel_at.iter().filter(|&(_, &at)| at <= step).map(|(&id, _)| id).collect();
        for id in due {
            clients.cancel_at.remove(&id);
            if batcher.cancel(&mut engine, id).is_some() {
                cancelled += 1;
                ended += 1;
            }
        }
        for ev in batcher.step(&mut engine)? {
            match ev {
                SeqEvent::Token { id, token, .. } => {
                    if let Some(g) = clients.greedy.get_mut(&id) {
                        g.2.push(token);
                    }
                }
                SeqEvent::Finished(s) => {
                    clients.cancel_at.remove(&s.id);
                    if let Some((p, max_tokens, ids)) = clients.greedy.remove(&s.id) {
                        greedy_done += 1;
                        if a.sample_every > 0 && greedy_done % a.sample_every == 0 && s.finish == Finish::Length {
                            samples.push(json!({"id": s.id, "prompt_ids": p, "max_tokens": max_tokens, "ids": ids}));
                        }
                    }
                    ended += 1;
                }
                SeqEvent::Failed { id, error } => bail!("request {id}: {error}"),
            }
        }
        for _ in 0..ended {
            done += 1;
            let now = Instant::now();
            if done == tenth {
                first_end = now;
            }
            if done == n - tenth {
                last_from = now;
            }
            if done == n {
                last_end = now;
            }
            // The client sends its next request at once, past the n-th too: the last tenth
            // runs at the same load as the first.
            if done < n {
                if submitted == n - tenth {
                    clients.rng = Rng(a.seed.max(1));
                }
                clients.send(a, &mut batcher, submitted as u64, step);
                submitted += 1;
            }
        }
        step += 1;
    }
    // What is still in flight was sent only to keep the load up.
    for id in batcher.ids() {
        batcher.cancel(&mut engine, id);
    }
    while !batcher.is_idle() {
        batcher.step(&mut engine)?;
    }
    let end = Snapshot::take(&engine)?;
    let (first_rate, last_rate) = (rate(tenth, t0, first_end), rate(tenth, last_from, last_end));

    let mut failures = Vec::new();
    if end.gpu_buffers != start.gpu_buffers || end.gpu_bytes != start.gpu_bytes {
        failures.push(format!(
            "GPU buffers created during the soak: {} ({} bytes)",
            end.gpu_buffers - start.gpu_buffers,
            end.gpu_bytes - start.gpu_bytes
        ));
    }
    let growth = (end.rss_kib as f64 / start.rss_kib as f64 - 1.0) * 100.0;
    if growth > a.rss_growth {
        failures
            .push(format!("RSS grew {growth:.1}% ({} to {} KiB), over {}%", start.rss_kib, end.rss_kib, a.rss_growth));
    }
    if end.threads != start.threads {
        failures.push(format!("threads went from {} to {}", start.threads, end.threads));
    }
    if last_rate < first_rate * a.min_rate / 100.0 {
        failures.push(format!(
            "the last 10% ran at {last_rate:.2} requests/s, under {}% of the first 10%'s {first_rate:.2}",
            a.min_rate
        ));
    }
    if a.json {
        let v = json!({"model": label, "adapter": engine.gpu.info.name, "requests": n, "clients": a.clients,
            "cancelled": cancelled, "steps": step, "start": start, "end": end, "rss_growth_percent": growth,
            "first_requests_per_s": first_rate, "last_requests_per_s": last_rate, "samples": samples,
            "failures": failures});
        println!("{v}");
    } else {
        println!(
            "{label} on {}: {n} requests ({cancelled} cancelled) in {step} steps, {} clients, prompts of 1-{} and answers of 1-{} tokens",
            engine.gpu.info.name, a.clients, a.prompt_max, a.answer_max
        );
        println!("{:<14} {:>14} {:>14}", "", "start", "end");
        println!("{:<14} {:>14} {:>14}", "GPU buffers", start.gpu_buffers, end.gpu_buffers);
        println!("{:<14} {:>14} {:>14}", "GPU bytes", start.gpu_bytes, end.gpu_bytes);
        println!("{:<14} {:>14} {:>14}  ({growth:+.1}%)", "RSS KiB", start.rss_kib, end.rss_kib);
        println!("{:<14} {:>14} {:>14}", "threads", start.threads, end.threads);
        println!("{:<14} {:>14.2} {:>14.2}  (first and last 10% of the requests)", "requests/s", first_rate, last_rate);
    }
    if !failures.is_empty() {
        bail!("soak failed: {}", failures.join("; "));
    }
    Ok(())
}

/// The random clients: what they send, which of their requests to cancel, and the ids of
/// their greedy requests so far (sampled against the same request run alone).
struct Clients {
    rng: Rng,
    vocab: u64,
    /// Step at which each request to cancel is cancelled.
    cancel_at: HashMap<u64, u64>,
    /// Prompt, answer length and ids so far of each greedy request not to be cancelled.
    greedy: HashMap<u64, (Vec<u32>, usize, Vec<u32>)>,
}

impl Clients {
    fn prompt(&mut self, len: usize) -> Vec<u32> {
        (0..len).map(|_| (self.rng.next() % self.vocab) as u32).collect()
    }

    /// Sends request `id` at `step`: half greedy, 40% sampled on the GPU, 10% with a
    /// repetition penalty.
    fn send(&mut self, a: &SoakArgs, batcher: &mut Batcher, id: u64, step: u64) {
        let len = self.rng.upto(a.prompt_max);
        let p = self.prompt(len);
        let max_tokens = self.rng.upto(a.answer_max);
        let kind = match self.rng.next() % 10 {
            0..=4 => 0,
            5..=8 => 1,
            _ => 2,
        };
        let priority =
            if self.rng.percent(a.background_percent) { Priority::Background } else { Priority::Interactive };
        if self.rng.percent(a.cancel_percent) {
            self.cancel_at.insert(id, step + self.rng.next() % (a.answer_max as u64 + 4));
        } else if kind == 0 {
            self.greedy.insert(id, (p.clone(), max_tokens, Vec::new()));
        }
        batcher.submit(request(id, p, max_tokens, sampling(kind, id), priority));
    }
}

fn request(
    id: u64,
    prompt_ids: Vec<u32>,
    max_tokens: usize,
    sampling: SamplingParams,
    priority: Priority,
) -> SeqRequest {
    SeqRequest { id, prompt_ids, max_tokens, sampling, stop_at_eos: false, priority, logprobs: None }
}
