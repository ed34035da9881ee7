//! `wginfer bench kernels`, everything but the GEMV table: the adapter's measured limits first
//! (read bandwidth from `probe_read`, matmul throughput from the prefill core at a large
//! square shape), then attention (plain, grouped, flash and split at contexts 128 .. 16384 for a decode token,
//! the router's pick for a prompt step), RMSNorm, embedding
//! gather, fused QKV + RoPE and SwiGLU (decode), the prefill matmul core, argmax and sampling,
//! at the shapes of real models; each with GB/s or TFLOP/s and its % of the measured limit.

use anyhow::Result;
use serde_json::json;

use super::bench::{time_dispatches, CHAIN};
use crate::gpu::profiler::Profiler;
use crate::gpu::Gpu;
use crate::kv::KvType;
use crate::model::config::Activation;
use crate::model::synthetic;
use crate::model::tensor::DType;
use crate::ops::argmax::Argmax;
use crate::ops::attention::{Attention, AttnBuffers, AttnOptions, AttnStep, Thresholds};
use crate::ops::attention_coop;
use crate::ops::attention_flash::AttentionFlash;
use crate::ops::attention_grouped::AttentionGrouped;
use crate::ops::attention_plain::{self, AttentionPlain};
use crate::ops::attention_split::AttentionSplit;
use crate::ops::dequant_f16::DequantF16;
use crate::ops::embedding::Embedding;
use crate::ops::input_f16::InputF16;
use crate::ops::linear::{InputNorm, LinearConfig, Rows};
use crate::ops::matmul::Matmul;
use crate::ops::plan::Plan;
use crate::ops::probe_launch::{LaunchShape, ProbeLaunch};
use crate::ops::probe_phases::{PhaseShape, ProbePhases};
use crate::ops::probe_read::ProbeRead;
use crate::ops::qkv_rope::{HeadShape, QkvBuffers, QkvRope};
use crate::ops::rmsnorm::{NormBuffers, NormRows, RmsNorm};
use crate::ops::sample::{Sample, SampleParams};
use crate::ops::swiglu::SwiGlu;
use crate::ops::{Step, Weight, WeightType};
use crate::sampling::SamplingParams;

/// One result row.
struct Row<'a> {
    kernel: &'a str,
    model: &'a str,
    shape: String,
    median_ns: f64,
    spread_ns: f64,
    bytes: u64,
    flops: u64,
}

#[derive(Clone, Copy)]
pub(super) struct Limits {
    /// Read bandwidth (bytes per ns = GB/s).
    pub gb_s: f64,
    pub tflops: f64,
}

pub(super) struct Printer {
    pub json: bool,
    pub limits: Option<Limits>,
}

impl Printer {
    fn print(&self, r: &Row) {
        let gbs = r.bytes as f64 / r.median_ns;
        let tflops = r.flops as f64 / r.median_ns / 1e3;
        // Memory-bound kernels against the bandwidth, matmuls against the matmul limit.
        let pct =
            self.limits.as_ref().map(|l| if r.flops > 0 { 100.0 * tflops / l.tflops } else { 100.0 * gbs / l.gb_s });
        if self.json {
            let v = json!({"kernel": r.kernel, "model": r.model, "shape": r.shape, "median_us": r.median_ns / 1e3,
                "p10_p90_us": r.spread_ns / 1e3, "bytes": r.bytes, "gb_s": gbs, "flops": r.flops, "tflop_s": tflops,
                "percent_of_limit": pct});
            println!("{v}");
        } else {
            let pct = pct.map(|p| format!("{p:.1}%")).unwrap_or_default();
            let tf = if r.flops > 0 { format!("{tflops:.2}") } else { String::new() };
            println!(
                "{:<16} {:<14} {:<26} {:>10.2} {:>9.2} {:>9.1} {:>8} {:>7}",
                r.kernel,
                r.model,
                r.shape,
                r.median_ns / 1e3,
                r.spread_ns / 1e3,
                gbs,
                tf,
                pct
            );
        }
    }

    pub fn header(&self) {
        if !self.json {
            println!(
                "{:<16} {:<14} {:<26} {:>10} {:>9} {:>9} {:>8} {:>7}",
                "kernel", "model", "shape", "median us", "spread", "GB/s", "TFLOP/s", "limit"
            );
        }
    }
}

/// The shapes one model contributes (the real presets, or a small one for software adapters).
struct Shapes {
    name: &'static str,
    d: u32,
    inter: u32,
    vocab: u32,
    heads: HeadShape,
    contexts: &'static [u32],
    prefill_rows: u32,
}

fn shapes(quick: bool) -> Result<Vec<Shapes>> {
    if quick {
        let heads = HeadShape { n_heads: 4, n_kv_heads: 2, head_dim: 64 };
        return Ok(vec![Shapes {
            name: "quick",
            d: 256,
            inter: 512,
            vocab: 1024,
            heads,
            contexts: &[128, 512],
            prefill_rows: 32,
        }]);
    }
    ["smollm2-135m", "qwen2.5-0.5b", "llama-3.2-1b"]
        .into_iter()
        .map(|name| {
            let c = synthetic::preset(name)?;
            let heads =
                HeadShape { n_heads: c.heads as u32, n_kv_heads: c.kv_heads as u32, head_dim: c.head_dim as u32 };
            Ok(Shapes {
                name,
                d: c.hidden as u32,
                inter: c.intermediate as u32,
                vocab: c.vocab as u32,
                heads,
                contexts: &[128, 512, 1024, 2048, 4096, 8192, 16384],
                prefill_rows: 512,
            })
        })
        .collect()
}

pub(super) fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    synthetic::random_values(n, 1.0, seed)
}

/// `v` as a K or V cache of `kv` values.
fn upload_kv(gpu: &Gpu, label: &str, v: &[f32], kv: KvType) -> Result<wgpu::Buffer> {
    match kv {
        KvType::F32 => upload(gpu, label, v),
        KvType::F16 => {
            let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f32(x)).collect();
            gpu.storage_from(label, bytemuck::cast_slice(&h))
        }
    }
}

pub(super) fn upload(gpu: &Gpu, label: &str, v: &[f32]) -> Result<wgpu::Buffer> {
    gpu.storage_from(label, bytemuck::cast_slice(v))
}

fn f16_weight(gpu: &Gpu, name: &str, rows: u32, cols: u32) -> Result<Weight> {
    let (rows, cols) = (rows as usize, cols as usize);
    let data = synthetic::random_gpu_weight(DType::F16, rows, cols, (rows ^ cols) as u64)?;
    Weight::upload(gpu, name, WeightType::F16, rows, cols, &data)
}

/// The adapter's limits: read bandwidth and prefill-matmul throughput.
pub(super) fn limits(gpu: &Gpu, prof: &mut Profiler, reps: u32, quick: bool, out: &Printer) -> Result<Limits> {
    let bytes = if quick { 16 << 20 } else { (1u64 << 30).min(gpu.caps.max_binding) };
    let src = gpu.storage("probe src", bytes)?;
    let sink = gpu.storage("probe sink", 16)?;
    let probe = ProbeRead::new(gpu, &src, &sink)?;
    let (median_ns, spread_ns) = time_dispatches(gpu, prof, (reps, CHAIN), quick, 1, |p, _| probe.record(p))?;
    let read = Row {
        kernel: "probe_read",
        model: "-",
        shape: format!("{} MiB", probe.bytes >> 20),
        median_ns,
        spread_ns,
        bytes: probe.bytes,
        flops: 0,
    };
    let n = if quick { 256 } else { 4096 };
    let rows = if quick { 64 } else { 2048 };
    let (mm, tflops) = matmul_case(gpu, prof, &LinearConfig::for_gpu(gpu), (reps, quick), "-", [n, n, rows])?;
    let limits = Limits { gb_s: probe.bytes as f64 / median_ns, tflops };
    // The probes are the limits: 100% by definition.
    let printer = Printer { json: out.json, limits: Some(limits) };
    printer.print(&read);
    printer.print(&mm);
    launch_rows(gpu, prof, reps, quick, &Printer { json: out.json, limits: None })?;
    Ok(limits)
}

/// Dependent launches per timed chain of the launch probe (the timestamps' own cost, spread
/// over the chain, stays under 0.1 us per launch).
const LAUNCH_CHAIN: usize = 64;

/// What one dependent kernel launch costs (the floor under every decode kernel): chains of
/// LAUNCH_CHAIN probe dispatches timed as one, reported per launch, in shapes (wg: workgroups)
/// that tell the parts apart.
fn launch_rows(gpu: &Gpu, prof: &mut Profiler, reps: u32, quick: bool, out: &Printer) -> Result<()> {
    // Independent launches write counters of their own, so wgpu puts no barrier between them.
    let counters: Vec<wgpu::Buffer> =
        (0..LAUNCH_CHAIN).map(|_| gpu.storage("launch counter", 16)).collect::<Result<_>>()?;
    let step = Step::buffer(gpu)?;
    let one = LaunchShape { workgroups: 1, threads: 64, read_step: false };
    // (label, shape, pipelines taking turns, counters)
    let cases = [
        ("1 wg", one, 1, 1),
        ("1 wg, uniform read", LaunchShape { read_step: true, ..one }, 1, 1),
        ("576 wg x 256 threads", LaunchShape { workgroups: 576, threads: 256, ..one }, 1, 1),
        ("1 wg, 2 pipelines", one, 2, 1),
        ("1 wg, independent", one, 1, counters.len()),
    ];
    for (label, shape, pipelines, n_counters) in cases {
        let ops: Vec<ProbeLaunch> = (0..pipelines.max(n_counters))
            .map(|i| ProbeLaunch::new(gpu, &shape, 1 + (i % pipelines) as u32, &counters[i % n_counters], &step))
            .collect::<Result<_>>()?;
        let record = |p: &mut wgpu::ComputePass<'_>, i: usize| ops[i].record(p);
        let (median_ns, spread_ns) = time_dispatches(gpu, prof, (reps, LAUNCH_CHAIN), quick, ops.len(), record)?;
        let row =
            Row { kernel: "probe_launch", model: "-", shape: label.into(), median_ns, spread_ns, bytes: 0, flops: 0 };
        out.print(&row);
    }
    if !gpu.caps.cpu {
        phase_rows(gpu, prof, reps, quick, out)?;
    }
    Ok(())
}

/// What a dependent kernel would cost as a phase of one dispatch instead of a launch
/// (`probe_phases`, LAUNCH_CHAIN phases a dispatch, reported per phase beside `probe_launch`'s
/// per-launch rows), in a single workgroup, one per SM of an H100 or H200, and a decode-sized
/// grid per phase. A row whose phases did not all see each other's stores, or waited in vain,
/// says so in its shape.
fn phase_rows(gpu: &Gpu, prof: &mut Profiler, reps: u32, quick: bool, out: &Printer) -> Result<()> {
    let phases = LAUNCH_CHAIN as u32;
    let shapes = [("1 wg", 1, 64), ("132 wg x 256 threads", 132, 256), ("576 wg x 256 threads", 576, 256)];
    for (label, workgroups, threads) in shapes {
        let op = ProbePhases::new(gpu, PhaseShape { workgroups, threads, phases })?;
        let (median_ns, spread_ns) = time_dispatches(gpu, prof, (reps, 1), quick, 1, |p, _| op.record(p))?;
        let c = op.counters(gpu)?;
        let shape = match (c.gave_up, c.stale) {
            (0, 0) => format!("{label} a phase"),
            (gave_up, stale) => format!("{label} a phase: {gave_up} waits gave up, {stale} stale reads"),
        };
        let per = f64::from(phases);
        let (median_ns, spread_ns) = (median_ns / per, spread_ns / per);
        out.print(&Row { kernel: "probe_phases", model: "-", shape, median_ns, spread_ns, bytes: 0, flops: 0 });
    }
    Ok(())
}

/// The prefill matmul core (tensor cores where the adapter has them) on `rows` rows of an f16
/// `[n, k]` weight; also returns its TFLOP/s.
fn matmul_case<'a>(
    gpu: &Gpu,
    prof: &mut Profiler,
    cfg: &LinearConfig,
    (reps, quick): (u32, bool),
    model: &'a str,
    [n, k, rows]: [u32; 3],
) -> Result<(Row<'a>, f64)> {
    let w = f16_weight(gpu, "w", n, k)?;
    let step = Step::buffer(gpu)?;
    Step { n_tokens: rows, ..Default::default() }.write(gpu, &step);
    let x = upload(gpu, "x", &random_f32((rows * k) as usize, 3))?;
    let y = gpu.storage("y", u64::from(rows * n) * 4)?;
    let op = Matmul::new(gpu, cfg, &w, &step, &x, &y, false, Rows::Tokens)?;
    let (median_ns, spread_ns) =
        time_dispatches(gpu, prof, (reps.min(20), CHAIN), quick, 1, |p, _| op.record(p, rows))?;
    let flops = 2 * u64::from(rows) * u64::from(n) * u64::from(k);
    let bytes = w.gpu_bytes() + u64::from(rows) * u64::from(n + k) * 4;
    let kernel = if cfg.coop_for(WeightType::F16, k, n).is_some() { "matmul_coop" } else { "matmul_tiled" };
    let row = Row { kernel, model, shape: format!("{rows}x{k} . {n}x{k}^T"), median_ns, spread_ns, bytes, flops };
    Ok((row, flops as f64 / median_ns / 1e3))
}

/// Times kernels and prints their rows (against the bandwidth limit, or the matmul limit where
/// a row gives its flops).
struct Reporter<'a> {
    gpu: &'a Gpu,
    prof: &'a mut Profiler,
    reps: u32,
    quick: bool,
    out: &'a Printer,
}

impl Reporter<'_> {
    fn row(
        &mut self,
        kernel: &str,
        model: &str,
        shape: String,
        (bytes, flops): (u64, u64),
        record: &dyn Fn(&mut wgpu::ComputePass<'_>),
    ) -> Result<()> {
        let (median_ns, spread_ns) =
            time_dispatches(self.gpu, self.prof, (self.reps, CHAIN), self.quick, 1, |p, _| record(p))?;
        self.out.print(&Row { kernel, model, shape, median_ns, spread_ns, bytes, flops });
        Ok(())
    }
}

/// Every kernel but GEMV at each model's shapes.
pub(super) fn run(gpu: &Gpu, prof: &mut Profiler, reps: u32, quick: bool, out: &Printer) -> Result<()> {
    let cfg = LinearConfig::for_gpu(gpu);
    let mut r = Reporter { gpu, prof, reps, quick, out };
    for m in shapes(quick)? {
        let step = Step::buffer(gpu)?;
        // Attention at each context: one decode token at position ctx - 1, over f32 and f16
        // caches.
        let h = m.heads;
        for (&ctx, kv_type) in m.contexts.iter().flat_map(|c| [(c, KvType::F32), (c, KvType::F16)]) {
            let heads = h;
            let kv = (ctx * heads.kv_dim()) as usize;
            let q = upload(gpu, "q", &random_f32(heads.q_dim() as usize, 1))?;
            let kc = upload_kv(gpu, "k", &random_f32(kv, 2), kv_type)?;
            let vc = upload_kv(gpu, "v", &random_f32(kv, 3), kv_type)?;
            let o = gpu.storage("o", u64::from(heads.q_dim()) * 4)?;
            Step { n_tokens: 1, n_out: 1, pad: [0; 2] }.write(gpu, &step);
            let plan = Plan::one_sequence(gpu, ctx, 1, ctx - 1, 0, 0)?;
            let b = AttnBuffers { q: &q, k_cache: &kc, v_cache: &vc, kv: kv_type, o: &o, plan: &plan, o_f16: None };
            let bytes = 2 * kv as u64 * kv_type.bytes() + u64::from(heads.q_dim()) * 8;
            let cache = if kv_type == KvType::F16 { ", f16 KV" } else { "" };
            let shape = format!("ctx {ctx}, {}x{} heads{cache}", h.n_heads, h.head_dim);
            let plain_shape = attention_plain::PlainShape::for_adapter(&gpu.caps, h.head_dim);
            if plain_shape.fits(&gpu.caps, h.head_dim, ctx, 1) {
                let plain = AttentionPlain::new(gpu, &heads, AttnOptions::full(&heads), ctx, &b)?;
                r.row("attention_plain", m.name, shape.clone(), (bytes, 0), &|p| plain.record(p, h.n_heads, 1))?;
            }
            if let Some(grouped) = AttentionGrouped::new(gpu, &heads, AttnOptions::full(&heads), ctx, &b)? {
                r.row("attention_grouped", m.name, shape.clone(), (bytes, 0), &|p| grouped.record(p, 1))?;
            }
            let flash = AttentionFlash::new(gpu, &heads, AttnOptions::full(&heads), &b)?;
            r.row("attention_flash", m.name, shape.clone(), (bytes, 0), &|p| flash.record(p, 1, ctx))?;
            if let Some(split) = AttentionSplit::new(gpu, &heads, AttnOptions::full(&heads), &b)? {
                r.row("attention_split", m.name, shape, (bytes, 0), &|p| split.record(p, 1, ctx))?;
            }
        }
        // A prompt step's attention: prefill_rows rows ending at a context of as many (a whole
        // prompt) and of 4x as many (a prompt's last chunk), on the kernel the router picks
        // (tensor cores where the adapter has them).
        let rows = m.prefill_rows;
        for ctx in [rows, 4 * rows] {
            let kv = (ctx * h.kv_dim()) as usize;
            let q = upload(gpu, "q", &random_f32((rows * h.q_dim()) as usize, 1))?;
            let (kc, vc) = (upload(gpu, "k", &random_f32(kv, 2))?, upload(gpu, "v", &random_f32(kv, 3))?);
            let o = gpu.storage("o", u64::from(rows * h.q_dim()) * 4)?;
            let tile_rows = attention_coop::tile_rows(&gpu.caps, h.head_dim);
            let plan = Plan::one_sequence(gpu, ctx, rows, ctx - rows, 0, tile_rows)?;
            let b = AttnBuffers { q: &q, k_cache: &kc, v_cache: &vc, kv: KvType::F32, o: &o, plan: &plan, o_f16: None };
            let att = Attention::new(gpu, &h, AttnOptions::full(&h), Thresholds::for_adapter(&gpu.caps), &b)?;
            let step = AttnStep { rows, context: ctx, tiles: plan.tiles };
            let kind = att.route(step);
            let bytes = 2 * kv as u64 * 4 + u64::from(rows * h.q_dim()) * 8;
            // Row i sees ctx - rows + i + 1 positions: QK^T and PV, 2 flops per multiply-add.
            let positions = u64::from(rows) * u64::from(ctx - rows) + u64::from(rows) * u64::from(rows + 1) / 2;
            let flops = 4 * positions * u64::from(h.head_dim * h.n_heads);
            let shape = format!("{rows} rows at ctx {ctx}, {}x{} heads", h.n_heads, h.head_dim);
            r.row(kind.kernel_name(), m.name, shape, (bytes, flops), &|p| att.record(p, kind, step))?;
        }
        Step { n_tokens: 1, n_out: 1, pad: [0; 2] }.write(gpu, &step);
        let x = upload(gpu, "x", &random_f32(m.d.max(m.inter) as usize, 4))?;
        let gamma = upload(gpu, "gamma", &random_f32(m.d as usize, 5))?;
        let y = gpu.storage("y", u64::from(m.d.max(m.inter)) * 8)?;
        // RMSNorm of one row.
        let norm_bufs = NormBuffers { x: &x, gamma: &gamma, y: &y };
        let norm = RmsNorm::new(gpu, m.d, 1e-6, NormRows::All, &norm_bufs)?;
        r.row("rmsnorm", m.name, format!("1x{}", m.d), (u64::from(m.d) * 12, 0), &|p| norm.record(p, 1))?;
        // The tensor-core prefill core's input rows: a prompt's hidden states, normalized, as f16.
        if gpu.caps.shader_f16 {
            let rows = m.prefill_rows;
            let xs = upload(gpu, "xs", &random_f32((rows * m.d) as usize, 8))?;
            let x16 = gpu.storage("x16", u64::from(rows * m.d) * 2)?;
            let input = InputF16::new(gpu, m.d, &xs, &x16, Some(InputNorm { weight: &gamma, eps: 1e-6 }))?;
            let bytes = u64::from(rows * m.d) * 6 + u64::from(m.d) * 4;
            r.row("input_f16", m.name, format!("{rows}x{}", m.d), (bytes, 0), &|p| input.record(p, rows))?;
        }
        // A quantized gate/up weight's f16 copy, written once a prompt step (`dequant_once`).
        if gpu.caps.shader_f16 {
            let (n, k) = (2 * m.inter, m.d);
            let data = synthetic::random_gpu_weight(DType::Q4_0, n as usize, k as usize, 9)?;
            let w = gpu.storage_from("w q4_0", &data)?;
            let copy = gpu.storage("w f16", u64::from(n * k) * 2)?;
            let dequant = DequantF16::new(gpu, WeightType::Q4_0, n, k, &w, &copy)?;
            let bytes = data.len() as u64 + u64::from(n * k) * 2;
            r.row("dequant_f16", m.name, format!("{n}x{k} q4_0"), (bytes, 0), &|p| dequant.record(p))?;
        }
        // Embedding gather of one token.
        let table = f16_weight(gpu, "embed", m.vocab, m.d)?;
        let ids = gpu.storage_from("ids", bytemuck::cast_slice(&[m.vocab / 2]))?;
        let embed = Embedding::new(gpu, &table, &step, &ids, &y, 1.0)?;
        let shape = format!("{}x{} f16", m.vocab, m.d);
        r.row("embedding", m.name, shape, (u64::from(m.d) * 6, 0), &|p| embed.record(p, 1))?;
        // Fused QKV + RoPE + KV write, and gate/up + SwiGLU, decode (the norms fused).
        let heads = h;
        let plan = Plan::one_sequence(gpu, 4096, 1, 100, 0, 0)?;
        let wqkv = f16_weight(gpu, "qkv", heads.q_dim() + 2 * heads.kv_dim(), m.d)?;
        let inv_freq = upload(gpu, "inv_freq", &random_f32((h.head_dim / 2) as usize, 6))?;
        let q = gpu.storage("q", u64::from(heads.q_dim()) * 4)?;
        let cache = u64::from(4096 * heads.kv_dim()) * 4;
        let (kc, vc) = (gpu.storage("k", cache)?, gpu.storage("v", cache)?);
        let bufs = QkvBuffers {
            step: &step,
            x: &x,
            bias: None,
            inv_freq: &inv_freq,
            q: &q,
            k_cache: &kc,
            v_cache: &vc,
            kv: KvType::F32,
            plan: &plan,
            norm: Some(InputNorm { weight: &gamma, eps: 1e-6 }),
            qk_norm: None,
        };
        let qkv = QkvRope::new(gpu, &cfg, &wqkv, &heads, &bufs)?;
        let shape = format!("{}x{} f16", wqkv.rows, m.d);
        r.row("qkv_rope", m.name, shape, (wqkv.gpu_bytes(), 0), &|p| qkv.record(p, 1))?;
        let wgu = f16_weight(gpu, "gate_up", 2 * m.inter, m.d)?;
        let norm = Some(InputNorm { weight: &gamma, eps: 1e-6 });
        let swiglu = SwiGlu::new(gpu, &cfg, &wgu, &step, &x, (&y, None), norm, Activation::Silu)?;
        let shape = format!("{}x{} f16", wgu.rows, m.d);
        r.row("swiglu", m.name, shape, (wgu.gpu_bytes(), 0), &|p| swiglu.record(p, 1))?;
        // The prefill matmul core on the gate/up shape.
        let (row, _) = matmul_case(gpu, r.prof, &cfg, (reps, quick), m.name, [2 * m.inter, m.d, m.prefill_rows])?;
        out.print(&row);
        // Greedy and sampled token choice over the vocabulary.
        let logits = upload(gpu, "logits", &random_f32(m.vocab as usize, 7))?;
        let id = gpu.storage("id", 4)?;
        let argmax = Argmax::new(gpu, m.vocab, 1, &logits, &id)?;
        let bytes = u64::from(m.vocab) * 4;
        r.row("argmax", m.name, m.vocab.to_string(), (bytes, 0), &|p| argmax.record(p, 1))?;
        let sample = Sample::new(gpu, m.vocab, 1, &logits, &id)?;
        let sp = SamplingParams { temperature: 0.7, top_k: 40, top_p: 0.9, ..Default::default() };
        sample.set(gpu, &[SampleParams::new(&sp, 1)]);
        r.row("sample", m.name, m.vocab.to_string(), (bytes, 0), &|p| sample.record(p, 1))?;
    }
    Ok(())
}
