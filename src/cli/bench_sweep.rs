//! `wginfer bench batch-sweep`: the seed's golden-window probe. For each concurrency B, B
//! clients each keep one request of fixed prompt and answer length in flight (closed loop)
//! until a fixed number of requests is done, all through the continuous batcher; reports
//! requests/s, total tokens/s, request latency P50/P99, inter-token latency P99, and
//! eta = QPS * T1 / B (T1: one request's latency alone; 1.0 means batching cost nothing), and
//! the decode speed: the rows of the steps in which every sequence ran one row over those
//! steps' wall time, the batch's generation speed once its prompts are in (llama-batched-bench's
//! S_TG; tok/s counts the prompt steps' time too).
//! The golden batch size is the largest B whose eta is within 10% of the best one's.
//! `--background N` runs N low-priority clients alongside (each keeps a background request in
//! flight while the interactive ones run), to see what they cost the interactive TTFT; every
//! background request must still finish.

use std::time::Instant;

use anyhow::{ensure, Context, Result};
use clap::Args;
use serde_json::json;

use super::bench::ModelChoice;
use super::KvTypeArg;
use crate::engine::EngineOptions;
use crate::gpu::GpuOptions;
use crate::kv::{KvLayout, KvOptions};
use crate::model::forward::{ForwardOptions, MAX_GRID_ROWS};
use crate::sampling::SamplingParams;
use crate::sched::metrics::percentiles;
use crate::sched::{BatchOptions, Batcher, Priority, SeqEvent, SeqRequest};

#[derive(Args, Debug)]
pub(super) struct SweepArgs {
    #[command(flatten)]
    model: ModelChoice,
    /// Concurrencies to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8,16,32,64")]
    batches: Vec<u32>,
    /// Requests per concurrency (at least B).
    #[arg(long, default_value_t = 64, value_parser = super::count_arg)]
    requests: usize,
    /// Prompt tokens per request.
    #[arg(long, default_value_t = 128, value_parser = super::count_arg)]
    prompt: usize,
    /// Generated tokens per request.
    #[arg(long, default_value_t = 128, value_parser = super::count_arg)]
    answer: usize,
    /// Most tokens in one step.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    max_batch_tokens: u32,
    /// Background clients running alongside the interactive ones.
    #[arg(long, default_value_t = 0)]
    background: u32,
    /// Most background prompt tokens in a step while an interactive request runs (default: 32
    /// on GPUs, 4 on CPU adapters).
    #[arg(long)]
    background_prompt_tokens: Option<u32>,
    /// Most background decode rows in a step while an interactive request runs (default:
    /// unbounded on GPUs, 4 on CPU adapters).
    #[arg(long)]
    background_decode_rows: Option<u32>,
    #[arg(long)]
    json: bool,
    #[arg(long)]
    adapter: Option<usize>,
    /// Time every kernel with GPU timestamps and print the breakdown of a step of each
    /// concurrency's B decode rows to stderr. The table's speeds are then not speeds: every
    /// step waits for its timestamps (on the H200, B = 1 455 tok/s against 1,005 without).
    #[arg(long)]
    profile: bool,
    /// How K and V values are stored.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F32)]
    kv_type: KvTypeArg,
    /// Print each concurrency's steps by row count (how many, their wall time) to stderr.
    #[arg(long)]
    steps: bool,
    /// Contexts longer than this use the long-context attention kernels (flash, or split)
    /// [default: 256 for one-row steps on GPUs, else 1024].
    #[arg(long)]
    attn_threshold: Option<u32>,
}

/// One concurrency's results.
struct Point {
    b: u32,
    requests: usize,
    secs: f64,
    tokens: usize,
    ttft_ms: Vec<f64>,
    latency_ms: Vec<f64>,
    itl_ms: Vec<f64>,
    rows_per_step: f64,
    /// Rows of the decode steps (every sequence one row) and their wall time.
    decode_rows: u32,
    decode_secs: f64,
}

impl Point {
    fn qps(&self) -> f64 {
        self.requests as f64 / self.secs
    }

    /// Decode rows per second of the decode steps, `None` without any.
    fn decode_tok_s(&self) -> Option<f64> {
        (self.decode_rows > 0).then(|| f64::from(self.decode_rows) / self.decode_secs)
    }
}

pub(super) fn run(a: &SweepArgs) -> Result<()> {
    ensure!(!a.batches.is_empty() && a.batches.iter().all(|&b| b > 0), "--batches must be positive");
    let max_b = *a.batches.iter().max().expect("checked");
    let context = super::bench::bench_context(&[a.prompt, a.answer])?;
    // Every sequence may have a row in one step.
    let parallel = max_b.checked_add(a.background).filter(|&p| p <= MAX_GRID_ROWS);
    let parallel = parallel
        .with_context(|| format!("--batches and --background: more than the {MAX_GRID_ROWS} sequences a step holds"))?;
    let kv = KvOptions { layout: KvLayout::Paged, context, parallel, dtype: a.kv_type.kv_type(), ..Default::default() };
    let forward = ForwardOptions {
        kv,
        max_rows: a.max_batch_tokens.max(parallel),
        profile: a.profile,
        attn_threshold: a.attn_threshold,
        ..Default::default()
    };
    let opts = EngineOptions { gpu: GpuOptions { adapter: a.adapter, ..Default::default() }, forward };
    let (mut engine, label) = a.model.engine(&opts)?;
    let vocab = engine.forward.cfg.vocab as u32;
    let defaults = BatchOptions::for_adapter(&engine.gpu.caps);
    let batch = BatchOptions {
        max_batch_tokens: a.max_batch_tokens,
        background_prompt_tokens: a.background_prompt_tokens.unwrap_or(defaults.background_prompt_tokens),
        background_decode_rows: a.background_decode_rows.unwrap_or(defaults.background_decode_rows),
        ..defaults
    };
    let prompt = |i: u64| -> Vec<u32> {
        (0..a.prompt as u64).map(|j| ((j * 7919 + i * 104_729 + 13) % u64::from(vocab)) as u32).collect()
    };
    // Every request of the run gets a prompt of its own: a prompt seen before (an earlier point's,
    // or an interactive one's for a background request) would be served from the prefix cache
    // where the pool keeps it, and a point's speed would depend on the points before it.
    let mut prompts_used = 0u64;
    // Background requests are numbered from here.
    const BACKGROUND: u64 = 1 << 40;
    let mut background_done = 0;
    let mut run_at = |b: u32, requests: usize, background: u32| -> Result<Point> {
        let mut batcher = Batcher::new(&mut engine, batch);
        let mut request = |i: u64| SeqRequest {
            id: i,
            prompt_ids: {
                prompts_used += 1;
                prompt(prompts_used)
            },
            max_tokens: a.answer,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
            priority: if i >= BACKGROUND { Priority::Background } else { Priority::Interactive },
            logprobs: None,
        };
        let t0 = Instant::now();
        let mut submitted = 0;
        while submitted < (b as usize).min(requests) {
            batcher.submit(request(submitted as u64));
            submitted += 1;
        }
        let mut background_next = BACKGROUND;
        for _ in 0..background {
            batcher.submit(request(background_next));
            background_next += 1;
        }
        let (mut ttft_ms, mut latency_ms, mut itl_ms, mut tokens, mut done) =
            (Vec::new(), Vec::new(), Vec::new(), 0, 0);
        let mut last_finish = t0;
        // --steps: wall time of the steps by their row count (the steps are pipelined, so a
        // step's wall time is about its GPU time).
        let mut by_rows = std::collections::BTreeMap::<u32, (u32, f64)>::new();
        let (mut decode_rows, mut decode_secs) = (0, 0.0);
        // --profile: the timings of the last step that ran a decode row for every client.
        let mut full_step = Vec::new();
        while done < requests || !batcher.is_idle() {
            // A call waits for (and reads) the step the previous call submitted.
            let (started, rows, one_row_each) = (Instant::now(), batcher.last_rows, batcher.last_one_row_each);
            let events = batcher.step(&mut engine)?;
            if rows > 0 {
                let secs = started.elapsed().as_secs_f64();
                let bucket = by_rows.entry(rows.next_power_of_two()).or_default();
                *bucket = (bucket.0 + 1, bucket.1 + secs * 1e3);
                if one_row_each {
                    (decode_rows, decode_secs) = (decode_rows + rows, decode_secs + secs);
                }
            }
            if a.profile && rows == b {
                full_step.clone_from(&engine.forward.timings);
            }
            for ev in events {
                match ev {
                    // A background client sends its next request while interactive work runs.
                    SeqEvent::Finished(s) if s.id >= BACKGROUND => {
                        background_done += 1;
                        if done < requests {
                            batcher.submit(request(background_next));
                            background_next += 1;
                        }
                    }
                    SeqEvent::Finished(s) => {
                        done += 1;
                        last_finish = Instant::now();
                        tokens += s.tokens;
                        ttft_ms.push(s.ttft_ms);
                        latency_ms.push(s.total_ms);
                        itl_ms.extend(s.itl_ms);
                        // The client sends its next request at once.
                        if submitted < requests {
                            batcher.submit(request(submitted as u64));
                            submitted += 1;
                        }
                    }
                    SeqEvent::Failed { error, .. } => anyhow::bail!("{error}"),
                    SeqEvent::Token { .. } => {}
                }
            }
        }
        let secs = last_finish.duration_since(t0).as_secs_f64();
        let rows_per_step = batcher.metrics.summary().rows_per_step;
        if a.steps {
            eprintln!("B = {b}, steps by rows (up to):");
            for (rows, (n, ms)) in &by_rows {
                eprintln!("  <= {rows:>5} rows: {n:>6} steps, {ms:>9.1} ms, {:>7.3} ms each", ms / f64::from(*n));
            }
        }
        if a.profile {
            super::print_timings(&engine.forward, &format!("a step of {b} decode rows"), &full_step);
        }
        Ok(Point { b, requests, secs, tokens, ttft_ms, latency_ms, itl_ms, rows_per_step, decode_rows, decode_secs })
    };
    // Warm-up (every pipeline compiled, clocks up), then T1: one request alone.
    run_at(max_b.min(4), max_b.min(4) as usize, 0)?;
    let alone = run_at(1, 3, 0)?;
    let t1 = percentiles(&alone.latency_ms).p50 / 1e3;
    let points: Vec<Point> =
        a.batches.iter().map(|&b| run_at(b, a.requests.max(b as usize), a.background)).collect::<Result<_>>()?;
    let eta = |p: &Point| p.qps() * t1 / f64::from(p.b);
    let best = points.iter().map(eta).fold(0.0, f64::max);
    let golden = points.iter().filter(|p| eta(p) >= 0.9 * best).map(|p| p.b).max().unwrap_or(1);
    if a.json {
        for p in &points {
            let (lat, itl, ttft) = (percentiles(&p.latency_ms), percentiles(&p.itl_ms), percentiles(&p.ttft_ms));
            let v = json!({"model": label, "adapter": engine.gpu.info.name, "b": p.b, "requests": p.requests,
                "background_clients": a.background, "ttft_p50_ms": ttft.p50, "ttft_p99_ms": ttft.p99,
                "prompt": a.prompt, "answer": a.answer, "requests_per_s": p.qps(), "tokens_per_s": p.tokens as f64 / p.secs,
                "latency_p50_ms": lat.p50, "latency_p99_ms": lat.p99, "itl_p99_ms": itl.p99, "eta": eta(p),
                "rows_per_step": p.rows_per_step, "decode_rows": p.decode_rows,
                "decode_tokens_per_s": p.decode_tok_s(), "golden": p.b == golden});
            println!("{v}");
        }
        return Ok(());
    }
    println!(
        "{label} on {}: {} prompt + {} generated tokens per request, T1 = {:.1} ms",
        engine.gpu.info.name,
        a.prompt,
        a.answer,
        t1 * 1e3
    );
    println!(
        "{:>4} {:>9} {:>10} {:>12} {:>12} {:>12} {:>12} {:>11} {:>6} {:>13}",
        "B",
        "req/s",
        "tok/s",
        "TTFT P99 ms",
        "lat P50 ms",
        "lat P99 ms",
        "ITL P99 ms",
        "rows/step",
        "eta",
        "decode tok/s"
    );
    for p in &points {
        let (lat, itl, ttft) = (percentiles(&p.latency_ms), percentiles(&p.itl_ms), percentiles(&p.ttft_ms));
        println!(
            "{:>4} {:>9.2} {:>10.0} {:>12.1} {:>12.1} {:>12.1} {:>12.2} {:>11.1} {:>6.2} {:>13}{}",
            p.b,
            p.qps(),
            p.tokens as f64 / p.secs,
            ttft.p99,
            lat.p50,
            lat.p99,
            itl.p99,
            p.rows_per_step,
            eta(p),
            p.decode_tok_s().map_or("-".to_string(), |t| format!("{t:.0}")),
            if p.b == golden { "  <- golden" } else { "" }
        );
    }
    let g = points.iter().find(|p| p.b == golden).expect("golden is one of the points");
    if a.background > 0 {
        println!("{} background clients alongside: {background_done} background requests finished", a.background);
    }
    println!(
        "golden batch size: {golden} (eta within 10% of the best, request latency P99 {:.1} ms)",
        percentiles(&g.latency_ms).p99
    );
    Ok(())
}
