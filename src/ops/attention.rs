//! The attention router: the tensor-core kernel for steps of multi-token query tiles where the
//! adapter has it; else the plain kernel (or the grouped-heads one, `grouped_for`) while the
//! context is at most the step's threshold (`Thresholds`), beyond it the flash kernel (or for steps of up to
//! `attention_split::MAX_ROWS` rows the split one where the adapter takes it, `split_for`).

use std::sync::OnceLock;

use anyhow::Result;

use super::attention_coop::AttentionCoop;
use super::attention_flash::AttentionFlash;
use super::attention_grouped::AttentionGrouped;
use super::attention_plain::AttentionPlain;
use super::attention_split::{self, AttentionSplit};
use super::linear::switch_knob;
use super::plan::{Plan, PlanLayout};
use super::qkv_rope::HeadShape;
use crate::gpu::shader::Defs;
use crate::gpu::{Caps, Gpu};
use crate::kv::KvType;

/// Whether short contexts run the grouped-heads kernel (`attention_grouped`) instead of the
/// plain one on this adapter: on CPU adapters (lavapipe, SmolLM2's 3 heads per KV head, 8
/// sequences of 200-token prompts: +13% requests/s, docs/PERF.md); GPUs have not been timed with
/// it. Kernel developers' knob: `WGINFER_ATTN_GROUPED` = 1 or 0.
pub fn grouped_for(caps: &Caps) -> bool {
    static KNOB: OnceLock<Option<bool>> = OnceLock::new();
    let knob = KNOB.get_or_init(|| switch_knob("WGINFER_ATTN_GROUPED"));
    knob.unwrap_or(caps.cpu)
}

/// Whether steps of up to `attention_split::MAX_ROWS` rows past the threshold run the split
/// kernel (`attention_split`: a KV group's query heads in one workgroup, positions split over
/// workgroups) instead of the flash kernel: on CPU adapters (lavapipe, SmolLM2's shapes, decode
/// after 1536 positions 3.0 -> 8.6 tok/s); on an H100 it lost at every depth (after 4096
/// positions 803 -> 739 tok/s, docs/PERF.md). Kernel developers' knob: `WGINFER_ATTN_SPLIT` = 1
/// or 0.
pub fn split_for(caps: &Caps) -> bool {
    static KNOB: OnceLock<Option<bool>> = OnceLock::new();
    let knob = KNOB.get_or_init(|| switch_knob("WGINFER_ATTN_SPLIT"));
    knob.unwrap_or(caps.cpu)
}

/// Context length (positions) above which GPUs run one-row steps on the flash kernel, which
/// splits their positions over workgroups: on an H100, decode after 256 / 512 positions
/// (Qwen2.5-0.5B, f16) took 1,022 / 1,011 tok/s with it against 985 / 888 with the plain
/// kernel, while after 128 positions the plain kernel kept its lead (1,036-1,041 against 1,024;
/// docs/PERF.md).
pub const GPU_ONE_ROW_THRESHOLD: u32 = 256;
/// The same for steps of several rows, whose flash workgroups walk a row's positions alone, and
/// for every step on CPU adapters, where the long-context kernel is the split one (not timed
/// below 1024 positions there): the batch sweep's 64-row steps lost 0.45% with 256 (docs/PERF.md).
pub const ROWS_THRESHOLD: u32 = 1024;

/// Context lengths (positions) above which the long-context kernels run: flash, or the split one
/// (`split_for`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// Steps of one row (a single sequence's decode).
    pub one_row: u32,
    /// Steps of several rows.
    pub rows: u32,
}

impl Thresholds {
    /// One threshold for every step (`--attn-threshold`).
    pub fn all(threshold: u32) -> Thresholds {
        Thresholds { one_row: threshold, rows: threshold }
    }

    /// What `--attn-threshold` leaves to the adapter.
    pub fn for_adapter(caps: &Caps) -> Thresholds {
        match caps.cpu {
            true => Thresholds::all(ROWS_THRESHOLD),
            false => Thresholds { one_row: GPU_ONE_ROW_THRESHOLD, rows: ROWS_THRESHOLD },
        }
    }

    /// The longest context the plain kernel serves.
    pub fn plain_max(&self) -> u32 {
        self.one_row.max(self.rows)
    }

    fn of_step(&self, rows: u32) -> u32 {
        match rows {
            1 => self.one_row,
            _ => self.rows,
        }
    }
}
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

/// Whether the attention kernels read f32 K and V as pairs of u64s (`kv_libs`): on CPU adapters
/// with SHADER_INT64, since llvmpipe pays for loads per lane and per component.
pub fn kv_u64(caps: &Caps) -> bool {
    caps.cpu && caps.int64
}

/// The pieces that read K and V: f32 as vec4s or as pairs of u64s (half the loads), f16 as
/// 8-byte words of four.
pub fn kv_libs(kv: KvType, kv_u64: bool) -> &'static [&'static str] {
    match (kv, kv_u64) {
        (KvType::F16, _) => &["lib/kv_f16"],
        (KvType::F32, true) => &["lib/u64_bits", "lib/kv_u64"],
        (KvType::F32, false) => &["lib/kv_vec4"],
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
    /// The kernels also write o as f16 rows (`AttnBuffers::o_f16`, lib/out_f16), which the o
    /// projection's tensor-core cores read instead of converting o in a dispatch of their own.
    pub o_f16: bool,
}

impl AttnOptions {
    /// Every position, scores scaled by 1 / sqrt(head_dim).
    pub fn full(h: &HeadShape) -> AttnOptions {
        AttnOptions { scale: 1.0 / (h.head_dim as f32).sqrt(), window: None, o_f16: false }
    }
}

/// Constants and pieces every attention kernel takes. `past_gemv`: the kernel serves steps of
/// more than GEMV_MAX_ROWS rows, whose o projection runs a tensor-core core that reads o's f16
/// copy (`opts.o_f16`); a kernel serving only fewer rows leaves the copy unwritten.
pub fn head_defs(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, wg_threads: u32, past_gemv: bool) -> Defs {
    let d = Defs::new()
        .u32("HD", h.head_dim)
        .u32("HQ", h.n_heads)
        .u32("HKV", h.n_kv_heads)
        .f32("SCALE", opts.scale)
        .u32("WINDOW", opts.window.unwrap_or(0))
        .u32("WG_THREADS", wg_threads)
        .piece(if opts.o_f16 { "lib/out_f16" } else { "lib/out_f16_none" })
        .bool("F16_COPY", past_gemv);
    plan.defs(d)
}

pub struct AttnBuffers<'a> {
    pub q: &'a wgpu::Buffer,
    pub k_cache: &'a wgpu::Buffer,
    pub v_cache: &'a wgpu::Buffer,
    /// How the caches store values.
    pub kv: KvType,
    pub o: &'a wgpu::Buffer,
    /// Each row's sequence and position, each sequence's KV blocks.
    pub plan: &'a Plan,
    /// o as f16 rows as well, where `AttnOptions::o_f16` asks for them (binding 7).
    pub o_f16: Option<&'a wgpu::Buffer>,
}

impl AttnBuffers<'_> {
    /// Bindings 0-4 of every kernel, then `extra` from binding 5 on, and `o_f16` at 7.
    pub fn entries<'b>(&'b self, extra: &[&'b wgpu::Buffer]) -> Vec<(u32, &'b wgpu::Buffer)> {
        let first = [self.q, self.k_cache, self.v_cache, self.o, &self.plan.buffer];
        let listed = first.into_iter().chain(extra.iter().copied()).enumerate().map(|(i, b)| (i as u32, b));
        listed.chain(self.o_f16.map(|b| (7, b))).collect()
    }
}

/// Which kernel served a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnKind {
    Plain,
    Flash,
    Coop,
    Grouped,
    Split,
}

impl AttnKind {
    pub fn kernel_name(self) -> &'static str {
        match self {
            AttnKind::Plain => "attention_plain",
            AttnKind::Flash => "attention_flash",
            AttnKind::Coop => "attention_coop",
            AttnKind::Grouped => "attention_grouped",
            AttnKind::Split => "attention_split",
        }
    }
}

/// What the router looks at in a step: its rows, the most positions any of them sees, and the
/// plan's query tiles (`Plan::tiles`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttnStep {
    pub rows: u32,
    pub context: u32,
    pub tiles: u32,
}

/// The tensor-core kernel serves a step whose tiles hold this many rows on average: one tile of
/// 16 rows per subgroup is wasted on a decode row, which the scalar kernels serve better.
pub const COOP_MIN_ROWS_PER_TILE: u32 = 8;

pub struct Attention {
    plain: AttentionPlain,
    flash: AttentionFlash,
    coop: Option<AttentionCoop>,
    /// Serves the steps the plain kernel would where `grouped_for` chose it.
    grouped: Option<AttentionGrouped>,
    /// Built where the adapter takes it (`split_for`) and its workgroup fits.
    split: Option<AttentionSplit>,
    thresholds: Thresholds,
    n_heads: u32,
    n_kv_heads: u32,
    window: Option<u32>,
}

impl Attention {
    pub fn new(
        gpu: &Gpu,
        h: &HeadShape,
        opts: AttnOptions,
        thresholds: Thresholds,
        b: &AttnBuffers,
    ) -> Result<Attention> {
        anyhow::ensure!(opts.window != Some(0), "an attention window must hold at least one position");
        anyhow::ensure!(opts.o_f16 == b.o_f16.is_some(), "attention's f16 rows of o need both the option and a buffer");
        for threshold in [thresholds.one_row, thresholds.rows] {
            anyhow::ensure!(
                (1..=MAX_THRESHOLD).contains(&threshold),
                "--attn-threshold {threshold} must be in 1..={MAX_THRESHOLD}"
            );
        }
        let threshold = thresholds.plain_max();
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
        Ok(Attention {
            plain: AttentionPlain::new(gpu, h, opts, threshold, b)?,
            flash: AttentionFlash::new(gpu, h, opts, b)?,
            coop: AttentionCoop::new(gpu, h, opts, b)?,
            grouped: match grouped_for(&gpu.caps) {
                true => AttentionGrouped::new(gpu, h, opts, threshold, b)?,
                false => None,
            },
            split: match split_for(&gpu.caps) {
                true => AttentionSplit::new(gpu, h, opts, b)?,
                false => None,
            },
            thresholds,
            n_heads: h.n_heads,
            n_kv_heads: h.n_kv_heads,
            window: opts.window,
        })
    }

    /// The kernel for a step.
    pub fn route(&self, step: AttnStep) -> AttnKind {
        if self.coop.is_some() && step.tiles > 0 && step.rows >= COOP_MIN_ROWS_PER_TILE * step.tiles {
            AttnKind::Coop
        } else if step.context <= self.thresholds.of_step(step.rows) {
            // Grouped where it keeps at least the workgroups the plain kernel has for one row: a
            // single decode row's KV heads alone leave a CPU adapter's threads idle.
            match self.grouped {
                Some(_) if step.rows * self.n_kv_heads >= self.n_heads => AttnKind::Grouped,
                _ => AttnKind::Plain,
            }
        } else if self.split.is_some() && step.rows <= attention_split::MAX_ROWS {
            AttnKind::Split
        } else {
            AttnKind::Flash
        }
    }

    /// Whether this adapter and plan have the tensor-core kernel.
    pub fn has_coop(&self) -> bool {
        self.coop.is_some()
    }

    /// Records `kind` (one `route` chose, or one the adapter has) for `step`.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, kind: AttnKind, step: AttnStep) {
        // A window sees fewer positions: a decode step splits only what it reads.
        let context = self.window.map_or(step.context, |w| step.context.min(w));
        match kind {
            AttnKind::Plain => self.plain.record(pass, self.n_heads, step.rows),
            AttnKind::Flash => self.flash.record(pass, step.rows, context),
            AttnKind::Coop => self.coop.as_ref().expect("route picks only built kernels").record(pass, step.tiles),
            AttnKind::Grouped => self.grouped.as_ref().expect("route picks only built kernels").record(pass, step.rows),
            AttnKind::Split => {
                self.split.as_ref().expect("route picks only built kernels").record(pass, step.rows, context)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On GPUs one-row steps leave the plain kernel at 256 positions, steps of several rows at
    /// 1024; CPU adapters and `--attn-threshold` give every step one threshold.
    #[test]
    fn thresholds_by_rows() {
        let gpu = Caps { cpu: false, ..Default::default() };
        let t = Thresholds::for_adapter(&gpu);
        assert_eq!([t.of_step(1), t.of_step(2), t.of_step(64), t.plain_max()], [256, 1024, 1024, 1024]);
        let cpu = Thresholds::for_adapter(&Caps { cpu: true, ..Default::default() });
        assert_eq!([cpu.of_step(1), cpu.of_step(8)], [1024, 1024]);
        assert_eq!([Thresholds::all(20).of_step(1), Thresholds::all(20).of_step(3)], [20, 20]);
    }
}
