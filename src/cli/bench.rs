//! `wginfer bench kernels`: GPU time of kernels at the shapes of real models, from timestamp
//! queries around each dispatch (median of repeated runs after warm-up), with the bytes each
//! run reads and the resulting bandwidth. Today it covers GEMV (decode matmul) for every
//! weight type; the other kernels join it with the benchmark issue.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::gpu::profiler::{Part, Profiler, Span};
use crate::gpu::{Gpu, GpuOptions};
use crate::ops::linear::LinearConfig;
use crate::ops::matmul::Matmul;
use crate::ops::{Step, Weight, WeightType};

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    what: BenchWhat,
}

#[derive(Subcommand, Debug)]
enum BenchWhat {
    /// Kernels at real model shapes.
    Kernels(KernelArgs),
}

#[derive(Args, Debug)]
struct KernelArgs {
    /// Small shapes, for software adapters.
    #[arg(long)]
    quick: bool,
    /// Timed runs per case (after warm-up).
    #[arg(long, default_value_t = 50)]
    reps: u32,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    json: bool,
    #[arg(long)]
    adapter: Option<usize>,
}

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

const TYPES: [WeightType; 8] = [
    WeightType::F32,
    WeightType::F16,
    WeightType::Q8_0,
    WeightType::Q4_0,
    WeightType::Q4_1,
    WeightType::Q5_0,
    WeightType::Q4_K,
    WeightType::Q6_K,
];

pub fn run(a: &BenchArgs) -> Result<()> {
    let BenchWhat::Kernels(k) = &a.what;
    let gpu = Gpu::new(&GpuOptions { adapter: k.adapter, ..Default::default() })?;
    let Some(mut prof) = Profiler::new(&gpu, k.reps + 1)? else {
        bail!("adapter {:?} cannot write timestamps inside a compute pass; nothing to measure with", gpu.info.name);
    };
    let shapes = if k.quick { QUICK_SHAPES } else { SHAPES };
    if !k.json {
        println!("adapter: {} ({:?})", gpu.info.name, gpu.info.backend);
        println!(
            "{:<14} {:<8} {:>14} {:>6} {:>10} {:>10} {:>9}",
            "model", "matrix", "shape", "type", "median us", "spread us", "GB/s"
        );
    }
    let cfg = LinearConfig::for_adapter(&gpu.caps);
    let step = Step::buffer(&gpu)?;
    Step { n_tokens: 1, ..Default::default() }.write(&gpu, &step);
    for &(model, matrix, rows, cols) in shapes {
        for ty in TYPES {
            let Some(row_bytes) = ty.row_bytes(cols) else { continue };
            let w = Weight::upload(&gpu, matrix, ty, rows, cols, &pseudo_random_bytes(rows * row_bytes))?;
            let x = gpu.storage("x", cols as u64 * 4)?;
            let y = gpu.storage("y", rows as u64 * 4)?;
            let op = Matmul::new(&gpu, &cfg, &w, &step, &x, &y, false, false)?;
            gpu.run_pass(|p| (0..5).for_each(|_| op.record(p, 1)))?; // warm-up (and driver compile)
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                prof.begin();
                for _ in 0..k.reps {
                    prof.mark(&mut pass, Span { layer: None, part: Part::Other, kernel: "matmul" });
                    op.record(&mut pass, 1);
                }
                prof.finish(&mut pass);
            }
            prof.resolve(&mut enc);
            gpu.queue.submit([enc.finish()]);
            let mut ns: Vec<f64> = prof.read(&gpu)?.iter().map(|t| t.ns).collect();
            ns.sort_by(f64::total_cmp);
            let median = ns[ns.len() / 2];
            let spread = ns[ns.len() * 9 / 10] - ns[ns.len() / 10];
            let bytes = w.gpu_bytes() + (cols + rows) as u64 * 4;
            let gbs = bytes as f64 / median;
            if k.json {
                let v = json!({"kernel": "gemv", "model": model, "matrix": matrix, "rows": rows, "cols": cols,
                    "type": ty.name(), "median_us": median / 1e3, "p10_p90_us": spread / 1e3, "bytes": bytes, "gb_s": gbs});
                println!("{v}");
            } else {
                let shape = format!("{rows}x{cols}");
                println!(
                    "{model:<14} {matrix:<8} {shape:>14} {:>6} {:>10.2} {:>10.2} {gbs:>9.1}",
                    ty.name(),
                    median / 1e3,
                    spread / 1e3
                );
            }
        }
    }
    Ok(())
}

/// Deterministic filler: timing does not depend on the values.
fn pseudo_random_bytes(n: usize) -> Vec<u8> {
    let mut s = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            // Keep f16 scale fields finite: clear the top exponent bit of every byte pair.
            (s >> 24) as u8 & 0xBF
        })
        .collect()
}
