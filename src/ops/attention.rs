//! The attention router: the plain kernel while the context is at most `threshold` positions,
//! the flash kernel beyond.

use anyhow::Result;

use super::attention_flash::AttentionFlash;
use super::attention_plain::{AttentionPlain, PlainShape};
use super::plan::{Plan, PlanLayout};
use super::qkv_rope::HeadShape;
use crate::gpu::shader::Defs;
use crate::gpu::{Caps, Gpu};

/// Default context length (positions) above which the flash kernel runs.
pub const DEFAULT_THRESHOLD: u32 = 1024;
/// The plain kernel keeps a row of scores in workgroup memory; this bounds the threshold.
pub const MAX_THRESHOLD: u32 = 8192;

/// The attention kernels' workgroup reductions (max and sum of the scores): through subgroup
/// operations where the adapter has them, two barriers each instead of lib/reduce's tree of
/// 2 + log2(threads).
pub fn reduce_lib(subgroups: bool) -> &'static str {
    match subgroups {
        true => "lib/reduce_subgroup",
        false => "lib/reduce",
    }
}

/// Lanes that read a K row together as adjacent vec4s, their parts added by subgroup shuffles
/// (lib/score_sum_shuffle): 4 where HD / 4 is a multiple of 4 (the best of 2, 4 and 8 for a
/// 512-token prefill on the H200, docs/PERF.md), else 2 or 1; one lane without subgroups.
pub fn score_lanes(caps: &Caps, head_dim: u32) -> u32 {
    match caps.subgroup {
        true => {
            [4, 2].into_iter().find(|&l| (head_dim / 4).is_multiple_of(l) && l <= caps.min_subgroup_size).unwrap_or(1)
        }
        false => 1,
    }
}

/// The piece that adds a score's parts over its `lanes` lanes.
pub fn score_sum_lib(lanes: u32) -> &'static str {
    match lanes {
        1 => "lib/score_sum_one",
        _ => "lib/score_sum_shuffle",
    }
}

/// Whether the attention kernels read K and V as pairs of u64s (`kv_libs`): on CPU adapters with
/// SHADER_INT64, since llvmpipe pays for loads per lane and per component.
pub fn kv_u64(caps: &Caps) -> bool {
    caps.cpu && caps.int64
}

/// The pieces that read K and V: as vec4<f32>s, or as pairs of u64s (half the loads).
pub fn kv_libs(kv_u64: bool) -> &'static [&'static str] {
    match kv_u64 {
        true => &["lib/u64_bits", "lib/kv_u64"],
        false => &["lib/kv_vec4"],
    }
}

/// A layer's attention: its score scale and, for a local layer, its window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttnOptions {
    /// Multiplies q.k: 1 / sqrt(head_dim), or Gemma's query_pre_attn_scalar^-0.5.
    pub scale: f32,
    /// A row attends to the last `window` positions only, its own included (a local layer's
    /// sliding window); `None`: every position its sequence holds.
    pub window: Option<u32>,
}

impl AttnOptions {
    /// Every position, scores scaled by 1 / sqrt(head_dim).
    pub fn full(h: &HeadShape) -> AttnOptions {
        AttnOptions { scale: 1.0 / (h.head_dim as f32).sqrt(), window: None }
    }
}

pub fn head_defs(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, wg_threads: u32) -> Defs {
    let d = Defs::new()
        .u32("HD", h.head_dim)
        .u32("HQ", h.n_heads)
        .u32("HKV", h.n_kv_heads)
        .f32("SCALE", opts.scale)
        .u32("WINDOW", opts.window.unwrap_or(0))
        .u32("WG_THREADS", wg_threads);
    plan.defs(d)
}

pub struct AttnBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    pub o: &'a wgpu::Buffer,
    /// Each row's sequence and position, each sequence's KV blocks.
    pub plan: &'a Plan,
}

impl AttnBuffers<'_> {
    /// Bindings 0-4 of both kernels.
    pub fn list(&self) -> [&wgpu::Buffer; 5] {
        [self.q, self.k_cache, self.v_cache, self.o, &self.plan.buffer]
    }
}

/// Which kernel served a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKind {
    Plain,
    Flash,
}

impl AttnKind {
    pub fn kernel_name(self) -> &'static str {
        match self {
            AttnKind::Plain => "attention_plain",
            AttnKind::Flash => "attention_flash",
        }
    }
}

pub struct Attention {
    plain: AttentionPlain,
    flash: AttentionFlash,
    threshold: u32,
    n_heads: u32,
    window: Option<u32>,
}

impl Attention {
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, threshold: u32, b: &AttnBuffers) -> Result<Attention> {
        anyhow::ensure!(opts.window != Some(0), "an attention window must hold at least one position");
        anyhow::ensure!(
            (1..=MAX_THRESHOLD).contains(&threshold),
            "--attn-threshold {threshold} must be in 1..={MAX_THRESHOLD}"
        );
        anyhow::ensure!(
            h.n_kv_heads > 0 && h.n_heads.is_multiple_of(h.n_kv_heads),
            "{} query heads are not a multiple of {} KV heads",
            h.n_heads,
            h.n_kv_heads
        );
        let wg = super::attention_flash::WG_THREADS;
        anyhow::ensure!(
            h.head_dim.is_multiple_of(4) && h.head_dim <= 4 * wg,
            "head_dim {}: the attention kernels need a multiple of 4, at most {}",
            h.head_dim,
            4 * wg
        );
        let wg_bytes = PlainShape::for_adapter(&gpu.caps, h.head_dim).workgroup_bytes(h.head_dim, threshold);
        anyhow::ensure!(
            wg_bytes <= gpu.caps.max_workgroup_storage,
            "--attn-threshold {threshold} needs {wg_bytes} bytes of workgroup memory; this adapter has {} (lower the threshold)",
            gpu.caps.max_workgroup_storage
        );
        Ok(Attention {
            plain: AttentionPlain::new(gpu, h, opts, threshold, b)?,
            flash: AttentionFlash::new(gpu, h, opts, b)?,
            threshold,
            n_heads: h.n_heads,
            window: opts.window,
        })
    }

    /// The kernel for a step whose longest row context is `context` positions.
    pub fn route(&self, context: u32) -> AttnKind {
        if context <= self.threshold {
            AttnKind::Plain
        } else {
            AttnKind::Flash
        }
    }

    /// `rows` tokens, the one seeing the most positions `context` of them (a window sees
    /// fewer: a decode step splits only what it reads).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, kind: AttnKind, rows: u32, context: u32) {
        let context = self.window.map_or(context, |w| context.min(w));
        match kind {
            AttnKind::Plain => self.plain.record(pass, self.n_heads, rows),
            AttnKind::Flash => self.flash.record(pass, rows, context),
        }
    }
}
