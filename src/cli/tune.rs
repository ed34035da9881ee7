//! `wginfer tune`: times every GEMV shape of bench's sweep on the weight shapes of a model, prints
//! each variant (llm.c's dev/cuda style), and stores the fastest per shape in the tune cache
//! (ops/tune.rs), which every later load on this adapter, driver and wgpu version uses. The
//! variants are timed in the plain matmul kernel; qkv_rope and swiglu share its GEMV core.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;

use super::bench::{sweep_configs, GemvBench, ModelChoice};
use crate::engine::EngineOptions;
use crate::gpu::profiler::Profiler;
use crate::gpu::GpuOptions;
use crate::kv::KvOptions;
use crate::model::forward::ForwardOptions;
use crate::ops::tune::{self, gemv_key, GemvTable};

#[derive(Args, Debug)]
pub struct TuneArgs {
    #[command(flatten)]
    model: ModelChoice,
    /// The cache file to update (default: $WGINFER_TUNE_CACHE, else
    /// $XDG_CACHE_HOME/wginfer/tune.json, else ~/.cache/wginfer/tune.json).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Timed samples per variant, each a chain of dependent dispatches (after warm-up).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..))]
    reps: u32,
    /// Short timing loops without warm-up (software adapters, tests).
    #[arg(long)]
    quick: bool,
    /// One JSON object per variant instead of a table.
    #[arg(long)]
    json: bool,
    #[arg(long)]
    adapter: Option<usize>,
}

pub fn run(a: &TuneArgs) -> Result<()> {
    let path = match &a.cache {
        Some(p) => p.clone(),
        None => tune::default_path().context("no cache path: set WGINFER_TUNE_CACHE or HOME, or give --cache")?,
    };
    let opts = EngineOptions {
        gpu: GpuOptions { adapter: a.adapter, ..Default::default() },
        forward: ForwardOptions { kv: KvOptions { context: 64, ..Default::default() }, ..Default::default() },
    };
    let (engine, label) = a.model.engine(&opts)?;
    let gpu = &engine.gpu;
    let Some(mut prof) = Profiler::new(gpu, a.reps + 1)? else {
        bail!("adapter {:?} cannot write timestamps inside a compute pass; nothing to tune with", gpu.info.name);
    };
    // Every distinct GEMV a decode step runs: the layers share shapes; a split LM head is one
    // GEMV per part.
    let w = &engine.forward.weights;
    let layer = w.layers.first().context("the model has no layers")?;
    let shapes: BTreeSet<(usize, usize, crate::ops::WeightType)> = [&layer.qkv, &layer.o, &layer.gate_up, &layer.down]
        .into_iter()
        .chain(std::iter::once(w.lm_head()))
        .flat_map(|m| m.parts.iter().map(move |p| (p.rows as usize, m.cols as usize, m.ty)))
        .collect();
    if !a.json {
        println!("tuning {label} on {} ({:?})", gpu.info.name, gpu.info.backend);
        println!("{:>14} {:>6} {:>12} {:>10} {:>9}", "shape", "type", "gemv shape", "median us", "GB/s");
    }
    let mut table = GemvTable::new();
    for (rows, cols, ty) in shapes {
        let Some(bench) = GemvBench::new(gpu, "tune", ty, rows, cols, a.quick)? else { continue };
        let mut best = None;
        for cfg in sweep_configs(gpu) {
            let shape = cfg.gemv_shape(cols as u32, rows as u32, ty);
            let (median, _) = bench.time(gpu, &mut prof, &cfg, a.reps, a.quick)?;
            let gbs = bench.bytes() as f64 / median;
            if a.json {
                let v = json!({"rows": rows, "cols": cols, "type": ty.name(), "gemv": shape.to_string(),
                    "median_us": median / 1e3, "gb_s": gbs});
                println!("{v}");
            } else {
                println!(
                    "{:>14} {:>6} {:>12} {:>10.2} {gbs:>9.1}",
                    format!("{rows}x{cols}"),
                    ty.name(),
                    shape.to_string(),
                    median / 1e3
                );
            }
            if best.is_none_or(|(t, _)| median < t) {
                best = Some((median, shape));
            }
        }
        if let Some((_, shape)) = best {
            table.insert(gemv_key(rows as u32, cols as u32, ty), shape);
        }
    }
    tune::store(&path, &gpu.info, &table)?;
    if !a.json {
        println!("stored {} GEMV shapes for {:?} in {}", table.len(), gpu.info.name, path.display());
    }
    Ok(())
}
