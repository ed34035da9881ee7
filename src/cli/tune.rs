//! `wginfer tune`: times every GEMV shape of bench's sweep on the weight shapes of a model, prints
//! each variant (llm.c's dev/cuda style), and stores the fastest per shape in the tune cache
//! (ops/tune.rs), which every later load on this adapter, driver and wgpu version uses. The
//! variants are timed in the plain matmul kernel; qkv_rope and swiglu share its GEMV core.
//! Like llm.c, every variant is checked against a CPU reference before it is timed: one whose
//! output is wrong is reported, never stored, and makes the command fail.

use std::collections::BTreeSet;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::json;

use super::bench::{sweep_configs, GemvBench, ModelChoice};
use crate::engine::EngineOptions;
use crate::gpu::profiler::Profiler;
use crate::gpu::{Gpu, GpuOptions};
use crate::kv::KvOptions;
use crate::model::forward::ForwardOptions;
use crate::model::synthetic::random_values;
use crate::model::tensor::{DType, HostTensor};
use crate::ops::linear::{GemvShape, LinearConfig, Rows};
use crate::ops::matmul::Matmul;
use crate::ops::tune::{self, gemv_key, GemvTable};
use crate::ops::{Step, Weight, WeightType};

#[derive(Args, Debug)]
pub struct TuneArgs {
    #[command(flatten)]
    model: ModelChoice,
    /// The cache file to update (default: $WGINFER_TUNE_CACHE, else
    /// $XDG_CACHE_HOME/wginfer/tune.json, else ~/.cache/wginfer/tune.json).
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Timed samples per variant, each a chain of dependent dispatches (after warm-up).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=super::bench::MAX_REPS))]
    reps: u32,
    /// Short timing loops without warm-up (software adapters, tests).
    #[arg(long)]
    quick: bool,
    /// Only these GEMV shapes (LANESlROWSrTHREADSt, comma-separated, e.g. 32l2r128t) instead of
    /// the heuristic's and bench's sweep.
    #[arg(long, value_delimiter = ',', value_parser = parse_gemv_shape)]
    variants: Option<Vec<GemvShape>>,
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
    tune::check_store(&path)?;
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
    let shapes: BTreeSet<(usize, usize, WeightType)> = [&layer.qkv, &layer.o, &layer.gate_up, &layer.down]
        .into_iter()
        .chain(std::iter::once(w.lm_head()))
        .flat_map(|m| m.parts.iter().map(move |p| (p.rows as usize, m.cols as usize, p.ty)))
        .collect();
    if !a.json {
        println!("tuning {label} on {} ({:?})", gpu.info.name, gpu.info.backend);
        println!("{:>14} {:>6} {:>12} {:>10} {:>9}", "shape", "type", "gemv shape", "median us", "GB/s");
    }
    let configs = match &a.variants {
        Some(shapes) => {
            shapes.iter().map(|&g| LinearConfig { gemv: Some(g), ..LinearConfig::for_adapter(&gpu.caps) }).collect()
        }
        None => sweep_configs(gpu),
    };
    let mut table = GemvTable::new();
    let mut wrong_variants = 0;
    for (rows, cols, ty) in shapes {
        let Some(bench) = GemvBench::new(gpu, "tune", ty, rows, cols, a.quick)? else { continue };
        let check = Check::new(gpu, ty, rows, cols)?;
        let mut best = None;
        for cfg in configs.iter().filter(|c| c.gemv_runs(cols as u32)) {
            let shape = cfg.gemv_shape(cols as u32, rows as u32, ty);
            let wrong = check.wrong_outputs(gpu, cfg)?;
            if wrong > 0 {
                wrong_variants += 1;
                if a.json {
                    let v = json!({"rows": rows, "cols": cols, "type": ty.name(), "gemv": shape.to_string(),
                        "wrong_outputs": wrong});
                    println!("{v}");
                } else {
                    println!(
                        "{:>14} {:>6} {:>12}   WRONG: {wrong} of {rows} outputs differ from the CPU's",
                        format!("{rows}x{cols}"),
                        ty.name(),
                        shape.to_string()
                    );
                }
                continue;
            }
            let (median, _) = bench.time(gpu, &mut prof, cfg, a.reps, a.quick)?;
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
    if wrong_variants > 0 {
        bail!(
            "{wrong_variants} GEMV variants gave wrong outputs on {:?} (reported above; none of them was stored)",
            gpu.info.name
        );
    }
    Ok(())
}

/// The inverse of `GemvShape`'s display: `32l2r128t` is 32 lanes, 2 rows, 128 threads.
fn parse_gemv_shape(s: &str) -> Result<GemvShape, String> {
    let parse = || {
        let (lanes, rest) = s.split_once('l')?;
        let (rows, threads) = rest.strip_suffix('t')?.split_once('r')?;
        Some(GemvShape { lanes: lanes.parse().ok()?, rows: rows.parse().ok()?, threads: threads.parse().ok()? })
    };
    let shape = parse().ok_or_else(|| format!("{s:?}: expected a GEMV shape like 32l2r128t"))?;
    shape.check().map_err(|e| format!("{e:#}"))?;
    Ok(shape)
}

/// How far a GEMV output may be from the CPU's, as a fraction of its sum of |products|: 50x the
/// f32 rounding of every type on lavapipe (2e-7); skipping 8 of 8192 columns moves an output by
/// ~3e-4 of it.
const TOLERANCE: f64 = 1e-5;

/// A `[rows, cols]` weight of one type, an input row and their product on the CPU: what every
/// GEMV variant must reproduce before it is timed.
struct Check {
    w: Weight,
    x: wgpu::Buffer,
    y: wgpu::Buffer,
    step: wgpu::Buffer,
    /// Per output: the CPU's value and the sum of |products| (the scale of f32 rounding).
    want: Vec<(f64, f64)>,
}

impl Check {
    fn new(gpu: &Gpu, ty: WeightType, rows: usize, cols: usize) -> Result<Check> {
        let dtype = DType::stored_as(ty);
        let row_bytes = dtype.bytes_for(cols).context("columns that are not whole blocks")?;
        // Bytes in 0x10..0x40 are valid data of every type, and each f32 or f16 in them (a weight,
        // or a block's scale) is a normal number in (0, 2); a Weyl sequence spreads them.
        let bytes: Vec<u8> = (0..(rows * row_bytes) as u64)
            .map(|i| 0x10 + ((i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) % 48) as u8)
            .collect();
        let tensor = HostTensor {
            name: "tune check".into(),
            dtype,
            shape: vec![rows, cols],
            bytes: &bytes,
            origin: String::new(),
        };
        let w = Weight::upload(gpu, "tune check", ty, rows, cols, &tensor.to_weight_bytes(ty)?)?;
        let x = random_values(cols, 1.0, 7);
        let want = tensor
            .to_f32()
            .chunks(cols)
            .map(|row| {
                let products: Vec<f64> = row.iter().zip(&x).map(|(&w, &x)| f64::from(w) * f64::from(x)).collect();
                (products.iter().sum(), products.iter().map(|p| p.abs()).sum())
            })
            .collect();
        let step = Step::buffer(gpu)?;
        Step { n_tokens: 1, n_out: 1, ..Default::default() }.write(gpu, &step);
        let x = gpu.storage_from("tune check x", bytemuck::cast_slice(&x))?;
        let y = gpu.storage("tune check y", rows as u64 * 4)?;
        Ok(Check { w, x, y, step, want })
    }

    /// How many of `cfg`'s GEMV outputs differ from the CPU's.
    fn wrong_outputs(&self, gpu: &Gpu, cfg: &LinearConfig) -> Result<usize> {
        let op = Matmul::new(gpu, cfg, &self.w, &self.step, &self.x, &self.y, false, Rows::Outputs)?;
        // NaN first, so an output the kernel never writes is wrong too.
        gpu.queue.write_buffer(&self.y, 0, bytemuck::cast_slice(&vec![f32::NAN; self.want.len()]));
        gpu.run_pass(|p| op.record(p, 1))?;
        let bytes = gpu.read_back(&self.y, self.want.len() as u64 * 4)?;
        let got: &[f32] = bytemuck::cast_slice(&bytes);
        Ok(got
            .iter()
            .zip(&self.want)
            .filter(|&(&g, &(want, size))| {
                let off = (f64::from(g) - want).abs();
                off.is_nan() || off > TOLERANCE * size
            })
            .count())
    }
}
