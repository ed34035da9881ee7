//! `wginfer bench kernels`: GPU time of kernels at the shapes of real models, from timestamp
//! queries around chains of dependent dispatches (median per dispatch of repeated samples after
//! warm-up, see `time_dispatches`), with the bytes each dispatch reads and the resulting
//! bandwidth: the adapter's measured limits first, GEMV for every
//! weight type, the linear cores per rows per step (where batched decode should leave the GEMV
//! cores), then every other kernel (cli/bench_ops.rs). `bench e2e`: whole-model speed.

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use super::bench_ops::{self, random_f32, upload};
use super::KvTypeArg;
use crate::engine::{Engine, EngineOptions, Request};
use crate::gpu::profiler::{Part, Profiler, Span};
use crate::gpu::{Gpu, GpuOptions};
use crate::kv::KvOptions;
use crate::model::forward::{Forward, ForwardOptions};
use crate::model::loader::load_weights;
use crate::model::synthetic;
use crate::model::tensor::DType;
use crate::ops::linear::{
    BoundLinear, Core, GemvShape, InputNorm, LinearConfig, LinearKernels, LinearShape, Rows, GEMV_MAX_ROWS,
    GEMV_WIDE_ROWS,
};
use crate::ops::matmul::{self, Matmul};
use crate::ops::{Step, Weight, WeightType};
use crate::sampling::SamplingParams;

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Kernels at real model shapes.
    Kernels(KernelArgs),
    /// Prefill and decode speed of a whole model, at batch 1.
    E2e(E2eArgs),
    /// Throughput and latency of many requests at once, for each concurrency (the golden
    /// batch size).
    BatchSweep(super::bench_sweep::SweepArgs),
    /// Many random requests with cancellations: GPU buffers, RSS, threads and requests/s must stay flat.
    Soak(super::bench_soak::SoakArgs),
}

/// A model file or a synthetic model (for `bench e2e` and `tune`).
#[derive(Args, Debug)]
pub(super) struct ModelChoice {
    /// A GGUF file or Hugging Face folder.
    #[arg(long, conflicts_with = "synthetic", required_unless_present = "synthetic")]
    model: Option<std::path::PathBuf>,
    /// Random weights with a real model's exact shapes: qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b,
    /// smollm2-135m.
    #[arg(long)]
    synthetic: Option<String>,
    /// Weight type of a synthetic model: f32, f16, or a block type (q8_0, q4_k, iq4_xs, ...)
    /// [default: f16]; a model's files give its own.
    #[arg(long, requires = "synthetic")]
    r#type: Option<String>,
}

impl ModelChoice {
    /// The engine for this model, and a label for reports.
    pub(super) fn engine(&self, opts: &EngineOptions) -> Result<(Engine, String)> {
        Ok(match (&self.model, &self.synthetic) {
            (Some(path), _) => (Engine::load(path, opts)?, path.display().to_string()),
            (None, Some(name)) => {
                let cfg = synthetic::preset(name)?;
                let ty = self.r#type.as_deref().unwrap_or("f16");
                let src = synthetic::Synthetic::new(&cfg, DType::stored_as(weight_type_named("--type", ty)?))?;
                let gpu = Gpu::new(&opts.gpu)?;
                let weights = load_weights(&gpu, &cfg, &src)?;
                let fwd = Forward::new(&gpu, cfg, weights, &opts.forward)?;
                (Engine::new(gpu, fwd, None, name.as_ref()), format!("{name} ({ty}, random weights)"))
            }
            (None, None) => bail!("give --model PATH or --synthetic NAME"),
        })
    }
}

#[derive(Args, Debug)]
struct E2eArgs {
    #[command(flatten)]
    model: ModelChoice,
    /// Prompt lengths to time prefill on.
    #[arg(long, value_delimiter = ',', default_value = "512,2048", value_parser = super::count_arg)]
    prefill: Vec<usize>,
    /// Tokens to time decode on.
    #[arg(long, default_value_t = 128, value_parser = super::count_arg)]
    decode: usize,
    /// Contexts to time decode after (llama-bench's -d): decode follows a prompt of this many
    /// tokens (16 at depth 0), so long-context decode is measured as users live it.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    depth: Vec<usize>,
    /// Contexts longer than this use the long-context attention kernels (flash, or split)
    /// [default: 256 for one-row steps on GPUs, else 1024].
    #[arg(long)]
    attn_threshold: Option<u32>,
    /// Runs of each measurement (the median is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    runs: u64,
    #[arg(long)]
    json: bool,
    #[arg(long)]
    adapter: Option<usize>,
    /// Time every kernel with GPU timestamps (slows the step a little) and print the breakdown
    /// of the last prefill of each length and of the last decode step to stderr.
    #[arg(long)]
    profile: bool,
    /// How K and V values are stored.
    #[arg(long, value_enum, default_value_t = KvTypeArg::F32)]
    kv_type: KvTypeArg,
}

#[derive(Args, Debug)]
struct KernelArgs {
    /// Small shapes, for software adapters.
    #[arg(long)]
    quick: bool,
    /// Timed samples per case, each a chain of dependent dispatches (after warm-up).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=MAX_REPS))]
    reps: u32,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    /// Also try every GEMV shape (lanes per row, outputs per lane group, threads) and report each.
    #[arg(long)]
    sweep: bool,
    /// Weight shapes to time instead of the real models' (ROWSxCOLS, comma-separated).
    #[arg(long, value_delimiter = ',', value_parser = parse_shape)]
    shapes: Option<Vec<(usize, usize)>>,
    /// Only these weight types (comma-separated names, e.g. f16,q4_0).
    #[arg(long, value_delimiter = ',')]
    types: Option<Vec<String>>,
    /// Only steps of these row counts in the rows-per-step table (comma-separated, e.g. 1,8).
    #[arg(long, value_delimiter = ',')]
    rows: Option<Vec<u32>>,
    /// The rows-per-step table with each input row RMS-normalized inside the linear kernel, as
    /// a layer's QKV and gate/up projections run.
    #[arg(long)]
    norm: bool,
    #[arg(long)]
    adapter: Option<usize>,
}

/// The most timed repetitions: a timestamp query set holds at most 4096 queries, one more than
/// the repetitions.
pub(super) const MAX_REPS: i64 = 4095;

/// (model, matrix, rows, cols) of the GEMVs of one decode step.
const SHAPES: &[(&str, &str, usize, usize)] = &[
    ("smollm2-135m", "qkv", 960, 576),
    ("smollm2-135m", "gate_up", 3072, 576),
    ("smollm2-135m", "down", 576, 1536),
    ("smollm2-135m", "lm_head", 49152, 576),
    ("qwen2.5-0.5b", "qkv", 1152, 896),
    ("qwen2.5-0.5b", "gate_up", 9728, 896),
    ("qwen2.5-0.5b", "down", 896, 4864),
    ("qwen2.5-0.5b", "lm_head", 151936, 896),
    ("llama-3.2-1b", "qkv", 3072, 2048),
    ("llama-3.2-1b", "gate_up", 16384, 2048),
    ("llama-3.2-1b", "down", 2048, 8192),
];

const QUICK_SHAPES: &[(&str, &str, usize, usize)] = &[("quick", "gemv", 512, 512), ("quick", "gemv", 1024, 256)];

/// The weights of a layer that a batched decode step multiplies by one row per sequence (f16
/// unless --types): the rows-per-step table.
const STEP_SHAPES: &[(&str, &str, usize, usize)] =
    &[("qwen2.5-0.5b", "qkv", 1152, 896), ("qwen2.5-0.5b", "gate_up", 9728, 896), ("qwen2.5-0.5b", "down", 896, 4864)];

/// Rows per step of the rows-per-step table: a batched decode step has one per sequence.
const STEP_ROWS: [u32; 9] = [1, 2, 4, 8, 16, 32, 64, 128, 256];

pub fn run(a: &BenchArgs) -> Result<()> {
    match &a.what {
        BenchWhat::Kernels(k) => kernels(k),
        BenchWhat::E2e(e) => e2e(e),
        BenchWhat::BatchSweep(s) => super::bench_sweep::run(s),
        BenchWhat::Soak(s) => super::bench_soak::run(s),
    }
}

/// The weight type called `name` (`WeightType::name`), for the option `flag`.
fn weight_type_named(flag: &str, name: &str) -> Result<WeightType> {
    WeightType::ALL.into_iter().find(|t| t.name() == name).with_context(|| {
        let all: Vec<&str> = WeightType::ALL.iter().map(|t| t.name()).collect();
        format!("{flag} {name}: not one of {}", all.join(", "))
    })
}

/// The context for a benchmark's sequences of `positions` (summed), with 16 to spare: an error
/// past u32 (a prompt length of 2^32 made a context of 17 and then a prompt of 16 GiB).
pub(super) fn bench_context(positions: &[usize]) -> Result<u32> {
    let total = positions.iter().try_fold(16usize, |sum, &p| sum.checked_add(p));
    total.and_then(|t| u32::try_from(t).ok()).with_context(|| {
        let parts: Vec<String> = positions.iter().map(usize::to_string).collect();
        format!("{} positions do not fit a context", parts.join(" + "))
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn e2e(a: &E2eArgs) -> Result<()> {
    let context_of = |depth: usize| depth.max(16);
    // Every prompt length the runs take: the prefills' and the depths' contexts.
    let prompt_lens: Vec<usize> = a.prefill.iter().copied().chain(a.depth.iter().map(|&d| context_of(d))).collect();
    let longest = prompt_lens.iter().copied().max().unwrap_or(16);
    let kv =
        KvOptions { context: bench_context(&[longest, a.decode])?, dtype: a.kv_type.kv_type(), ..Default::default() };
    let forward = ForwardOptions { kv, profile: a.profile, attn_threshold: a.attn_threshold, ..Default::default() };
    let opts = EngineOptions { gpu: GpuOptions { adapter: a.adapter, ..Default::default() }, forward };
    let (mut engine, label) = a.model.engine(&opts)?;
    let vocab = engine.forward.cfg.vocab as u32;
    let prompt = |n: usize| -> Vec<u32> { (0..n as u32).map(|i| (i * 7919 + 13) % vocab).collect() };
    let greedy = SamplingParams::default();
    let request = |n: usize, max_tokens: usize| Request {
        prompt_ids: prompt(n),
        max_tokens,
        sampling: greedy.clone(),
        stop_at_eos: false,
    };
    // Warm-up: compile every pipeline on the driver, let the clocks rise.
    for &n in &prompt_lens {
        engine.reset();
        engine.generate(&request(n, 2), |_| true)?;
    }
    engine.reset();
    engine.generate(&request(16, 32), |_| true)?;
    let mut prefill = Vec::new();
    for &n in &a.prefill {
        let runs = (0..a.runs)
            .map(|_| {
                engine.reset();
                Ok(engine.generate(&request(n, 1), |_| true)?.prefill_tok_s)
            })
            .collect::<Result<Vec<_>>>()?;
        prefill.push((n, median(runs)));
        if a.profile {
            eprintln!("prefill of {n} tokens:");
            super::print_profile(&engine.forward);
        }
    }
    let mut decode = Vec::new();
    for &depth in &a.depth {
        let runs = (0..a.runs)
            .map(|_| {
                engine.reset();
                Ok(engine.generate(&request(context_of(depth), a.decode + 1), |_| true)?.decode_tok_s)
            })
            .collect::<Result<Vec<_>>>()?;
        decode.push((depth, median(runs)));
        if a.profile {
            eprintln!("decode step at depth {depth}:");
            super::print_profile(&engine.forward);
        }
    }
    let f = &engine.forward;
    let launches = f.last_launches;
    let weights_mib = f.weights.gpu_bytes() as f64 / (1 << 20) as f64;
    let gpu_mib = engine.gpu.bytes_allocated() as f64 / (1 << 20) as f64;
    if a.json {
        let pre: serde_json::Map<String, serde_json::Value> =
            prefill.iter().map(|(n, v)| (n.to_string(), json!(v))).collect();
        let at_depth: serde_json::Map<String, serde_json::Value> =
            decode.iter().map(|(d, v)| (d.to_string(), json!(v))).collect();
        // decode_tok_s: the first depth's (depth 0 unless --depth says otherwise).
        let v = json!({"model": label, "adapter": engine.gpu.info.name, "prefill_tok_s": pre,
            "decode_tok_s": decode[0].1, "decode_tok_s_at_depth": at_depth, "decode_tokens": a.decode, "dispatches_per_decode_step": launches,
            "weights_mib": weights_mib, "gpu_memory_mib": gpu_mib});
        println!("{v}");
    } else {
        println!(
            "model: {label}
adapter: {} ({:?})",
            engine.gpu.info.name, engine.gpu.info.backend
        );
        for (n, v) in &prefill {
            println!("prefill {n:>5} tokens: {v:>10.0} tok/s");
        }
        for (depth, v) in &decode {
            let at = if *depth > 0 { format!(", depth {depth}") } else { String::new() };
            println!("decode {:>6} tokens: {v:>10.1} tok/s (batch 1{at})", a.decode);
        }
        println!("per decode step: {launches} dispatches, 1 submit");
        println!("GPU memory: {gpu_mib:.0} MiB ({weights_mib:.0} MiB of weights)");
    }
    Ok(())
}

/// Bytes of weight copies the GEMV timing cycles through: several times the largest last
/// level caches (H200: 60 MiB).
const COLD_BYTES: usize = 512 << 20;

/// GEMV shapes (lanes per row, outputs per lane group, threads) `--sweep` tries besides the
/// heuristic's, llm.c style.
const GEMV_VARIANTS: [(u32, u32, u32); 22] = [
    (1, 2, 8),
    (1, 4, 8),
    (8, 1, 256),
    (8, 2, 256),
    (16, 1, 128),
    (16, 1, 256),
    (16, 2, 256),
    (16, 4, 256),
    (32, 1, 256),
    (32, 2, 256),
    (32, 4, 256),
    (64, 2, 256),
    (64, 4, 256),
    (128, 1, 256),
    (128, 2, 256),
    (256, 2, 256),
    (32, 2, 128),
    (16, 4, 128),
    (32, 4, 128),
    (32, 4, 64),
    (64, 2, 128),
    (128, 2, 128),
];

fn kernels(k: &KernelArgs) -> Result<()> {
    let gpu = Gpu::new(&GpuOptions { adapter: k.adapter, ..Default::default() })?;
    let Some(mut prof) = Profiler::new(&gpu, k.reps + 1)? else {
        bail!("adapter {:?} cannot write timestamps inside a compute pass; nothing to measure with", gpu.info.name);
    };
    let custom: Vec<(&str, &str, usize, usize)> =
        k.shapes.iter().flatten().map(|&(r, c)| ("custom", "gemv", r, c)).collect();
    let shapes = match () {
        _ if k.shapes.is_some() => &custom[..],
        _ if k.quick => QUICK_SHAPES,
        _ => SHAPES,
    };
    let types: Vec<WeightType> = match &k.types {
        Some(names) => names.iter().map(|n| weight_type_named("--types", n)).collect::<Result<_>>()?,
        None => WeightType::ALL.to_vec(),
    };
    let configs = if k.sweep { sweep_configs(&gpu) } else { vec![LinearConfig::for_adapter(&gpu.caps)] };
    // The adapter's limits first (every row's % is against them), then the GEMV table; GEMV
    // experiments (--sweep, --shapes, --types) stop there, the full run goes on with every
    // other kernel.
    let full = !(k.sweep || k.shapes.is_some() || k.types.is_some());
    if !k.json {
        println!("adapter: {} ({:?})", gpu.info.name, gpu.info.backend);
    }
    let mut printer = bench_ops::Printer { json: k.json, limits: None };
    printer.header();
    printer.limits = Some(bench_ops::limits(&gpu, &mut prof, k.reps, k.quick, &printer)?);
    let limit_gb_s = printer.limits.as_ref().map(|l| l.gb_s);
    if !k.json {
        println!(
            "{:<14} {:<8} {:>14} {:>6} {:>12} {:>10} {:>10} {:>9} {:>7}",
            "model", "matrix", "shape", "type", "gemv shape", "median us", "spread us", "GB/s", "limit"
        );
    }
    for &(model, matrix, rows, cols) in shapes {
        for &ty in &types {
            let Some(bench) = GemvBench::new(&gpu, matrix, ty, rows, cols, k.quick)? else { continue };
            for cfg in configs.iter().filter(|c| c.gemv_runs(cols as u32)) {
                let (median, spread) = bench.time(&gpu, &mut prof, cfg, k.reps, k.quick)?;
                let bytes = bench.bytes();
                let gbs = bytes as f64 / median;
                let variant = cfg.gemv_shape(cols as u32, rows as u32, ty).to_string();
                if k.json {
                    let v = json!({"kernel": "gemv", "model": model, "matrix": matrix, "rows": rows, "cols": cols,
                        "type": ty.name(), "gemv": variant, "heuristic": cfg.gemv.is_none(), "median_us": median / 1e3,
                        "p10_p90_us": spread / 1e3, "bytes": bytes, "gb_s": gbs,
                        "percent_of_limit": limit_gb_s.map(|l| 100.0 * gbs / l)});
                    println!("{v}");
                } else {
                    let shape = format!("{rows}x{cols}");
                    println!(
                        "{model:<14} {matrix:<8} {shape:>14} {:>6} {variant:>12} {:>10.2} {:>10.2} {gbs:>9.1} {:>7}",
                        ty.name(),
                        median / 1e3,
                        spread / 1e3,
                        limit_gb_s.map(|l| format!("{:.1}%", 100.0 * gbs / l)).unwrap_or_default()
                    );
                }
            }
        }
    }
    let step_shapes = match () {
        _ if k.shapes.is_some() => &custom[..],
        _ if k.quick => &QUICK_SHAPES[..1],
        _ => STEP_SHAPES,
    };
    let step_types = if k.types.is_some() { types } else { vec![WeightType::F16] };
    let table =
        StepTable { json: k.json, reps: k.reps, quick: k.quick, limit_gb_s, rows: k.rows.clone(), norm: k.norm };
    table.run(&gpu, &mut prof, &configs, step_shapes, &step_types)?;
    if full {
        printer.header();
        bench_ops::run(&gpu, &mut prof, k.reps, k.quick, &printer)?;
    }
    Ok(())
}

/// The linear cores by rows per step: the core each row count gets (`BoundLinear::core_for`),
/// both tensor-core cores from GEMV_WIDE_ROWS on and the widest GEMV variant past GEMV_MAX_ROWS
/// (where most weights' GEMV cores stop, then where the split core does), each once, so the
/// crossovers can be read off: time per step, per row, and the weight's bandwidth.
struct StepTable {
    json: bool,
    reps: u32,
    quick: bool,
    limit_gb_s: Option<f64>,
    /// `--rows`: only these row counts.
    rows: Option<Vec<u32>>,
    /// `--norm`: the input's RMSNorm fused into the kernel.
    norm: bool,
}

impl StepTable {
    /// `configs[0]` for every core; the others (--sweep's GEMV shapes) for the GEMV cores only,
    /// the one thing they change.
    fn run(
        &self,
        gpu: &Gpu,
        prof: &mut Profiler,
        configs: &[LinearConfig],
        shapes: &[(&str, &str, usize, usize)],
        types: &[WeightType],
    ) -> Result<()> {
        if !self.json {
            println!(
                "{:<14} {:<8} {:>14} {:>6} {:>5} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}",
                "model",
                "matrix",
                "shape",
                "type",
                "rows",
                "core",
                "gemv shape",
                "median us",
                "spread us",
                "us/row",
                "GB/s",
                "limit"
            );
        }
        // None: the core a step of these rows runs (`BoundLinear::core_for`).
        let cases: Vec<(u32, Option<Core>)> = STEP_ROWS
            .into_iter()
            .flat_map(|r| {
                // The cores that cross over: the prefill and tensor-core cores from the widest GEMV
                // variant's rows on (the prefill core over a quantized weight's f16 copy too), and
                // that variant past the rows it runs (a grid z per its rows).
                let tensor = (r >= GEMV_WIDE_ROWS).then_some([Core::Prefill, Core::PrefillCopy, Core::Split]);
                let gemv = (r > GEMV_MAX_ROWS).then_some(Core::GemvBatch(GEMV_WIDE_ROWS));
                let others = tensor.into_iter().flatten().chain(gemv).map(move |c| (r, Some(c)));
                std::iter::once((r, None)).chain(others)
            })
            .filter(|(r, _)| self.rows.as_ref().is_none_or(|only| only.contains(r)))
            .collect();
        for &(model, matrix, rows, cols) in shapes {
            for &ty in types {
                let Some(bench) = GemvBench::new(gpu, matrix, ty, rows, cols, self.quick)? else { continue };
                for (i, cfg) in configs.iter().enumerate().filter(|(_, c)| c.gemv_runs(cols as u32)) {
                    // The other configurations change the GEMV cores only.
                    let gemv_only = |&&(r, c): &&(u32, Option<Core>)| c.is_none() && r <= GEMV_MAX_ROWS;
                    for &(step_rows, core) in cases.iter().filter(|c| i == 0 || gemv_only(c)) {
                        let Some((median, spread, core)) =
                            bench.time_core(gpu, prof, cfg, (step_rows, core, self.norm), self.reps, self.quick)?
                        else {
                            continue;
                        };
                        let (core_name, variant) = cfg.core_label(ty, cols as u32, rows as u32, core, step_rows);
                        let bytes = bench.step_bytes(step_rows);
                        let gbs = bytes as f64 / median;
                        let per_row = median / 1e3 / f64::from(step_rows);
                        let pct = self.limit_gb_s.map(|l| 100.0 * gbs / l);
                        if self.json {
                            let v = json!({"kernel": "linear_rows", "model": model, "matrix": matrix, "rows": rows,
                                "cols": cols, "norm": self.norm, "type": ty.name(), "step_rows": step_rows, "core": core_name,
                                "gemv": variant, "median_us": median / 1e3, "p10_p90_us": spread / 1e3,
                                "us_per_row": per_row, "bytes": bytes, "gb_s": gbs, "percent_of_limit": pct});
                            println!("{v}");
                        } else {
                            let shape = format!("{rows}x{cols}");
                            println!(
                                "{model:<14} {matrix:<8} {shape:>14} {:>6} {step_rows:>5} {core_name:>12} {variant:>12} {:>10.2} {:>10.2} {per_row:>9.2} {gbs:>9.1} {:>7}",
                                ty.name(),
                                median / 1e3,
                                spread / 1e3,
                                pct.map(|p| format!("{p:.1}%")).unwrap_or_default()
                            );
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

fn parse_shape(s: &str) -> Result<(usize, usize), String> {
    let (r, c) = s.split_once('x').ok_or_else(|| format!("{s:?}: expected ROWSxCOLS, e.g. 896x4864"))?;
    let num = |v: &str| match v.parse::<usize>() {
        Ok(0) => Err(format!("{s:?}: a dimension of 0")),
        Ok(n) => Ok(n),
        Err(e) => Err(format!("{s:?}: {e}")),
    };
    Ok((num(r)?, num(c)?))
}

/// The heuristic's GEMV configuration and every variant of GEMV_VARIANTS (one-lane shapes only
/// where the rows core runs).
pub(super) fn sweep_configs(gpu: &Gpu) -> Vec<LinearConfig> {
    let heuristic = LinearConfig::for_adapter(&gpu.caps);
    std::iter::once(heuristic)
        .chain(GEMV_VARIANTS.iter().filter(|v| v.0 > 1 || heuristic.has_rows_core()).map(|&(lanes, rows, threads)| {
            LinearConfig { gemv: Some(GemvShape { lanes, rows, threads }), ..heuristic }
        }))
        .collect()
}

/// One weight shape set up for GEMV timing: copies of a random weight, enough that the timed
/// loop reads DRAM rather than the last level cache (a decode step reads ~1 GB of distinct
/// weights), and the x and y it reads and writes (room for the most rows of STEP_ROWS).
pub(super) struct GemvBench {
    ws: Vec<Weight>,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    step: wgpu::Buffer,
    /// The RMSNorm weight of a normalizing step (`time_core`'s `norm`).
    gamma: wgpu::Buffer,
}

impl GemvBench {
    /// `None` when `cols` is not whole blocks of `ty`.
    pub(super) fn new(
        gpu: &Gpu,
        name: &str,
        ty: WeightType,
        rows: usize,
        cols: usize,
        quick: bool,
    ) -> Result<Option<Self>> {
        let Some(row_bytes) = ty.row_bytes(cols) else { return Ok(None) };
        let copies = if quick { 1 } else { (COLD_BYTES / (rows * row_bytes)).clamp(1, 64) };
        let bytes = synthetic::random_gpu_weight(DType::stored_as(ty), rows, cols, 1)?;
        let ws = (0..copies).map(|_| Weight::upload(gpu, name, ty, rows, cols, &bytes)).collect::<Result<Vec<_>>>()?;
        let step = Step::buffer(gpu)?;
        let most = u64::from(STEP_ROWS[STEP_ROWS.len() - 1]);
        let (x, y) = (gpu.storage("x", most * cols as u64 * 4)?, gpu.storage("y", most * rows as u64 * 4)?);
        let gamma = upload(gpu, "gamma", &random_f32(cols, 2))?;
        Ok(Some(GemvBench { ws, x, y, step, gamma }))
    }

    /// Bytes one GEMV reads and writes: the weight as stored, x and y.
    pub(super) fn bytes(&self) -> u64 {
        self.step_bytes(1)
    }

    /// Bytes a step of `rows` rows reads and writes: the weight as stored, x and y.
    fn step_bytes(&self, rows: u32) -> u64 {
        let w = &self.ws[0];
        w.gpu_bytes() + u64::from(rows) * u64::from(w.cols + w.rows) * 4
    }

    /// Median and p10-p90 spread (ns per GEMV) of `reps` timed chains with `cfg`, from GPU
    /// timestamps.
    pub(super) fn time(
        &self,
        gpu: &Gpu,
        prof: &mut Profiler,
        cfg: &LinearConfig,
        reps: u32,
        quick: bool,
    ) -> Result<(f64, f64)> {
        Step { n_tokens: 1, n_out: 1, ..Default::default() }.write(gpu, &self.step);
        let ops = self
            .ws
            .iter()
            .map(|w| Matmul::new(gpu, cfg, w, &self.step, &self.x, &self.y, false, Rows::Outputs))
            .collect::<Result<Vec<_>>>()?;
        time_dispatches(gpu, prof, (reps, CHAIN), quick, ops.len(), |pass, i| ops[i].record(pass, 1))
    }

    /// Like `time`, for a step of `rows` rows through `core` (of the weight's single part; by
    /// default the one such a step runs), which it returns; `None` where the kernel has no such
    /// core (`Core::Split` off tensor cores, `Core::PrefillCopy` where no weight is copied).
    /// `norm`: each row of x RMS-normalized on the way in.
    fn time_core(
        &self,
        gpu: &Gpu,
        prof: &mut Profiler,
        cfg: &LinearConfig,
        (rows, core, norm): (u32, Option<Core>, bool),
        reps: u32,
        quick: bool,
    ) -> Result<Option<(f64, f64, Core)>> {
        Step { n_tokens: rows, n_out: 1, ..Default::default() }.write(gpu, &self.step);
        let ops = self
            .ws
            .iter()
            .map(|w| {
                let norm = norm.then_some(InputNorm { weight: &self.gamma, eps: 1e-6 });
                let part = w.single()?;
                let shape = LinearShape {
                    k: w.cols,
                    n: w.rows,
                    rows: Rows::Tokens,
                    norm_eps: norm.map(|n| n.eps),
                    layout: part.layout,
                };
                let k = LinearKernels::new(gpu, "matmul", &matmul::defs(false, w.rows, 0), part.ty, &shape, cfg)?;
                BoundLinear::new(gpu, k, &[&self.step, &self.x, &part.buffer, &self.y], norm, Default::default())
            })
            .collect::<Result<Vec<_>>>()?;
        // A core named where the step's rows run it anyway is the routed row's twin.
        let routed = ops[0].core_for(rows);
        if core.is_some_and(|c| c == routed || !ops[0].has(c)) {
            return Ok(None);
        }
        let core = core.unwrap_or(routed);
        let (median, spread) = time_dispatches(gpu, prof, (reps, CHAIN), quick, ops.len(), |pass, i| {
            ops[i].record_core(pass, core, rows)
        })?;
        Ok(Some((median, spread, core)))
    }
}

/// Dispatches per timed sample: GPU timestamps written between two dispatches cost ~4.5 us
/// each on the H200 (a chain of dependent launches costs 1.8 us per launch, a store-only
/// kernel timed alone 6.3 us), so a sample times a chain of dependent dispatches, back to back
/// as a decode step runs them, and reports the time per dispatch.
pub(super) const CHAIN: usize = 8;

/// Median and p10-p90 spread (ns per dispatch) of `reps` samples from GPU timestamps, each a
/// chain of `chain` dispatches; `record(pass, i)` records one, `i` cycling through `variants`
/// (copies of the data, so caches do not help). Warm-up first: compile on the driver and keep
/// the GPU busy long enough to leave its idle clocks (200 ms; none with `quick`).
pub(super) fn time_dispatches(
    gpu: &Gpu,
    prof: &mut Profiler,
    (reps, chain): (u32, usize),
    quick: bool,
    variants: usize,
    record: impl Fn(&mut wgpu::ComputePass<'_>, usize),
) -> Result<(f64, f64)> {
    let warm_for = std::time::Duration::from_millis(if quick { 0 } else { 200 });
    let warm_start = std::time::Instant::now();
    loop {
        gpu.run_pass(|p| (0..variants).for_each(|i| record(p, i)))?;
        if warm_start.elapsed() >= warm_for {
            break;
        }
    }
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        prof.begin();
        for sample in 0..reps as usize {
            prof.mark(&mut pass, Span { layer: None, part: Part::Other, kernel: "bench" });
            (0..chain).for_each(|j| record(&mut pass, (sample * chain + j) % variants));
        }
        prof.finish(&mut pass);
    }
    prof.resolve(&mut enc);
    gpu.queue.submit([enc.finish()]);
    let mut ns: Vec<f64> = prof.read(gpu)?.iter().map(|t| t.ns / chain as f64).collect();
    ns.sort_by(f64::total_cmp);
    Ok((ns[ns.len() / 2], ns[ns.len() * 9 / 10] - ns[ns.len() / 10]))
}
