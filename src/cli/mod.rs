//! Subcommands of the `wginfer` binary.

mod batch;
mod bench;
mod bench_ops;
mod bench_soak;
mod bench_sweep;
mod chat;
mod generate;
mod info;
mod interrupt;
mod serve;
mod tune;

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand};

use crate::engine::EngineOptions;
use crate::gpu::GpuOptions;
use crate::kv::{KvLayout, KvOptions, KvType};
use crate::model::forward::ForwardOptions;
use crate::sampling::{check_repetition_penalty, check_temperature, check_top_p, SamplingParams};

/// Where `make model` puts the default model (SmolLM2-135M-Instruct).
pub const DEFAULT_MODEL: &str = "assets/models/SmolLM2-135M-Instruct.Q4_1.gguf";

#[derive(Parser)]
#[command(name = "wginfer", version, about = "LLM inference on wgpu (Llama, Qwen2, Qwen3, Mistral, Gemma 3)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt, streaming it to stdout.
    Generate(generate::GenerateArgs),
    /// Chat in the terminal (the conversation is kept between turns).
    Chat(chat::ChatArgs),
    /// Print the GPU adapters, the chosen one's features and limits, and optionally a model.
    Info(info::InfoArgs),
    /// Benchmarks: kernels (GPU timestamps), a whole model's speed, the batch-size sweep, a soak.
    Bench(bench::BenchArgs),
    /// Find the fastest GEMV shapes for a model's weights on this adapter and cache them.
    Tune(tune::TuneArgs),
    /// Run a file of requests (JSON lines) through the continuous batcher.
    Batch(batch::BatchArgs),
    /// Serve the OpenAI API (chat and text completions, streaming) over HTTP.
    Serve(serve::ServeArgs),
}

/// What to do with a prompt longer than the context: `left` drops its oldest tokens, keeping the
/// last `context - max_tokens` (at least one) so that the answer fits too. Without it such a
/// prompt is an error naming both lengths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Truncate {
    Left,
}

impl Truncate {
    /// `prompt`, where it is longer than a context of `context` positions and `truncate` says
    /// so, cut to leave `max_tokens` to generate; prints how many tokens were dropped (`what`:
    /// whose prompt). A prompt that fits is left whole (its answer ends where the context does).
    pub fn apply(truncate: Option<Truncate>, prompt: &mut Vec<u32>, context: usize, max_tokens: usize, what: &str) {
        let keep = context.saturating_sub(max_tokens).max(1);
        if truncate == Some(Truncate::Left) && prompt.len() > context {
            let dropped = prompt.len() - keep;
            prompt.drain(..dropped);
            eprintln!(
                "{what}: dropped the oldest {dropped} prompt tokens to fit the context of {context} (--truncate left)"
            );
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KvArg {
    Ring,
    Paged,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum KvTypeArg {
    F32,
    F16,
}

impl KvTypeArg {
    pub fn kv_type(self) -> KvType {
        match self {
            KvTypeArg::F32 => KvType::F32,
            KvTypeArg::F16 => KvType::F16,
        }
    }
}

/// Options shared by everything that loads a model.
#[derive(Args, Clone, Debug)]
pub struct ModelArgs {
    /// A GGUF file or a Hugging Face model folder (config.json, *.safetensors, tokenizer.json);
    /// default: the model `make model` fetches.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// GPU adapter index (see `wginfer info`); WGPU_BACKEND=vulkan|gl|... limits the backends.
    #[arg(long)]
    pub adapter: Option<usize>,
    /// MiB of GPU memory the engine may take in all (weights, KV cache, activations): what does
    /// not fit is an error naming it, as on an adapter with that much memory.
    #[arg(long)]
    pub gpu_memory: Option<u64>,
    /// Context length: positions the KV cache holds for one sequence.
    #[arg(long, default_value_t = 4096)]
    pub context: u32,
    /// Keep generating past a full context by overwriting the oldest positions (--kv ring).
    #[arg(long)]
    pub sliding_window: bool,
    /// KV memory layout: `ring` (one slot of --context positions per sequence, allocated at
    /// load; edge devices) or `paged` (a pool of --kv-block blocks shared by all sequences).
    #[arg(long, value_enum, default_value_t = KvArg::Ring)]
    pub kv: KvArg,
    /// Sequences at once (ring: slots allocated at load; paged: most running sequences).
    #[arg(long, default_value_t = 1)]
    pub parallel: u32,
    /// Positions per KV block (--kv paged) [default: 16].
    #[arg(long)]
    pub kv_block: Option<u32>,
    /// MiB of KV memory for the paged pool (default: --parallel sequences of --context).
    #[arg(long)]
    pub kv_memory: Option<u64>,
    /// How K and V values are stored: f32, or f16 (half the memory, so twice the context or
    /// sequences in the same --kv-memory; each value rounded to f16).
    #[arg(long, value_enum, default_value_t = KvTypeArg::F32)]
    pub kv_type: KvTypeArg,
    /// Contexts longer than this use the long-context attention kernels (flash, or split)
    /// [default: 256 for one-row steps on GPUs, else 1024].
    #[arg(long)]
    pub attn_threshold: Option<u32>,
    /// Time every kernel with GPU timestamps and print the last step's breakdown to stderr.
    #[arg(long)]
    pub profile: bool,
}

impl ModelArgs {
    pub fn model_path(&self) -> Result<PathBuf> {
        match &self.model {
            Some(p) => Ok(p.clone()),
            None => {
                let p = PathBuf::from(DEFAULT_MODEL);
                p.exists().then_some(p).with_context(|| {
                    format!("no --model given and the default model is not at {DEFAULT_MODEL} (run `make model`)")
                })
            }
        }
    }

    /// The engine's options; `--kv-block` without `--kv paged` is refused (a ring ignored it;
    /// the KV cache refuses `--kv-memory` so).
    pub fn engine_options(&self) -> Result<EngineOptions> {
        if self.kv == KvArg::Ring && self.kv_block.is_some() {
            anyhow::bail!("--kv-block sizes the paged pool's blocks: it needs --kv paged (a ring is one block of --context a sequence)");
        }
        Ok(EngineOptions {
            gpu: GpuOptions {
                adapter: self.adapter,
                memory_cap: self.gpu_memory.map(|mib| mib.saturating_mul(1 << 20)),
                ..Default::default()
            },
            forward: ForwardOptions {
                kv: KvOptions {
                    layout: match self.kv {
                        KvArg::Ring => KvLayout::Ring,
                        KvArg::Paged => KvLayout::Paged,
                    },
                    context: self.context,
                    parallel: self.parallel,
                    block: self.kv_block.unwrap_or(KvOptions::default().block),
                    blocks: None,
                    memory: self.kv_memory.map(|mib| mib.saturating_mul(1 << 20)),
                    sliding_window: self.sliding_window,
                    dtype: self.kv_type.kv_type(),
                },
                attn_threshold: self.attn_threshold,
                profile: self.profile,
                ..Default::default()
            },
        })
    }
}

/// Sampling options shared by `generate` and `chat`.
#[derive(Args, Clone, Debug)]
pub struct SamplingArgs {
    /// 0 = greedy.
    #[arg(long, default_value_t = 0.7, value_parser = float_arg(check_temperature))]
    pub temperature: f32,
    /// Keep the k most likely tokens (0 = all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the smallest set of tokens whose probability reaches p (0 < p <= 1).
    #[arg(long, default_value_t = 0.95, value_parser = float_arg(check_top_p))]
    pub top_p: f32,
    #[arg(long, default_value_t = 1.0, value_parser = float_arg(check_repetition_penalty))]
    pub repetition_penalty: f32,
    /// Same seed, same output (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
}

/// A count of at least 1 (clap's ranges take no usize): a zero would time nothing and print
/// made-up figures, or fail later without naming the option.
fn count_arg(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A float option checked by `check` (NaN, say, would pass a bare parse).
fn float_arg(check: fn(f32) -> Result<f32, String>) -> impl Fn(&str) -> Result<f32, String> + Clone {
    move |s| check(s.parse::<f32>().map_err(|e| format!("{s:?} is not a number: {e}"))?)
}

impl SamplingArgs {
    pub fn params(&self) -> SamplingParams {
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
        });
        SamplingParams {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            repetition_penalty: self.repetition_penalty,
            seed,
        }
    }
}

pub fn run() -> Result<()> {
    match Cli::parse().command {
        Command::Generate(a) => generate::run(&a),
        Command::Chat(a) => chat::run(&a),
        Command::Info(a) => info::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Tune(a) => tune::run(&a),
        Command::Batch(a) => batch::run(&a),
        Command::Serve(a) => serve::run(&a),
    }
}

/// The last step's GPU time per kernel and per layer, as a table on stderr.
pub fn print_profile(forward: &crate::model::forward::Forward) {
    print_timings(forward, "the last step", &forward.timings);
}

/// `what`'s GPU time per kernel and per layer (`t`: a profiled step's timings), on stderr.
pub fn print_timings(forward: &crate::model::forward::Forward, what: &str, t: &[crate::gpu::profiler::Timing]) {
    use crate::gpu::profiler::{by_kernel, by_layer};
    if !forward.profiling() {
        eprintln!("profile: this adapter cannot write timestamps inside a compute pass");
        return;
    }
    let total: f64 = t.iter().map(|x| x.ns).sum();
    eprintln!("GPU time of {what}: {:.1} us in {} dispatches", total / 1e3, t.len());
    eprintln!("{:<18} {:>6} {:>12} {:>10}", "kernel", "calls", "total us", "mean us");
    for k in by_kernel(t) {
        eprintln!(
            "{:<18} {:>6} {:>12.1} {:>10.2}",
            k.kernel,
            k.calls,
            k.total_ns / 1e3,
            k.total_ns / 1e3 / k.calls as f64
        );
    }
    let (layers, other) = by_layer(t);
    eprintln!("{:<8} {:>14} {:>10}", "layer", "attention us", "mlp us");
    for (i, l) in layers.iter().enumerate() {
        eprintln!("{:<8} {:>14.1} {:>10.1}", i, l.attention_ns / 1e3, l.mlp_ns / 1e3);
    }
    eprintln!("{:<8} {:>14.1}", "other", other / 1e3);
}
