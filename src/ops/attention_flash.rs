//! `shaders/attention_flash.wgsl`: tiled online-softmax attention (long contexts); a decode
//! token's positions are split over up to MAX_SPLITS workgroups per head and merged.

use std::sync::OnceLock;

use anyhow::{ensure, Result};

use super::attention::{head_defs, kv_libs, kv_u64, reduce_lib, score_lanes, score_sum_lib, AttnBuffers, AttnOptions};
use super::linear::shape_knob;
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Caps, Gpu, Kernel};
use crate::kv::KvType;

/// Threads per workgroup for heads of more than 64 dimensions (`FlashShape::for_adapter`), and
/// the most any shape takes: head_dim is at most 4 x this.
pub const WG_THREADS: u32 = 256;
/// A decode step's positions are spread over at most this many workgroups per head, unless the
/// knob says otherwise: a tile each up to 8192 positions. H200 decode after 4096 positions: 16
/// 712, 32 821, 64 874 tok/s; H100 with 128 threads, 64 889-893, 128 912-913 (the contexts of
/// that run pass 64 tiles, so 64 splits took two tiles each), after 8192 799-800 and 804-807
/// (docs/PERF.md).
pub const MAX_SPLITS: u32 = 128;
/// Query heads the kernel takes: the merge counters (one per head) lie at the start of the
/// partials buffer whatever the heads, so kernels of every shape share one buffer.
pub const MAX_HEADS: u32 = 1024;

/// Per-adapter choices of the flash kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlashShape {
    /// Threads per workgroup.
    pub threads: u32,
    /// Lanes per score (`score_lanes`): a tile is threads / score_lanes positions.
    pub score_lanes: u32,
    /// Workgroup reductions through subgroup operations (`reduce_lib`).
    pub subgroups: bool,
    /// K and V read as pairs of u64s (`kv_libs`).
    pub kv_u64: bool,
    /// Workgroups a decode token's positions spread over per head, at most.
    pub max_splits: u32,
}

/// Kernel developers' knob: `WGINFER_FLASH` = "threads,score_lanes,max_splits" (read once).
fn knob() -> Option<(u32, u32, u32)> {
    static K: OnceLock<Option<(u32, u32, u32)>> = OnceLock::new();
    *K.get_or_init(|| {
        shape_knob("WGINFER_FLASH", "threads,score_lanes,max_splits (powers of 2, threads >= 32)", |n| match *n {
            [t, l, s] if t >= 32 && [t, l, s].iter().all(|v| v.is_power_of_two()) => Some((t, l, s)),
            _ => None,
        })
    })
}

impl FlashShape {
    /// Heads of up to 64 dimensions take 128 threads and half the lanes per score (a tile
    /// stays 64 positions), so each thread loads twice the V values of a tile (8): on an H100,
    /// Qwen2.5-0.5B's decode after 4096 positions took 893 tok/s against 856 with 256 threads,
    /// after 512 1,011 against 978 (64 threads and one lane 849; tiles of 32 positions with 128
    /// threads 843, 256 threads 806; docs/PERF.md). Wider heads keep 256 threads (not timed).
    pub fn for_adapter(caps: &Caps, head_dim: u32) -> FlashShape {
        let (threads, lanes) = match head_dim <= 64 {
            true => (WG_THREADS / 2, (score_lanes(caps, head_dim) / 2).max(1)),
            false => (WG_THREADS, score_lanes(caps, head_dim)),
        };
        let shape = FlashShape {
            threads,
            score_lanes: lanes,
            subgroups: caps.subgroup,
            kv_u64: kv_u64(caps),
            max_splits: MAX_SPLITS,
        };
        match knob() {
            Some((threads, score_lanes, max_splits)) => {
                let knobbed = FlashShape { threads, score_lanes, max_splits, ..shape };
                match knobbed.fits(caps, head_dim) {
                    true => knobbed,
                    false => {
                        eprintln!("warning: WGINFER_FLASH does not fit head_dim {head_dim} on this adapter; ignored");
                        shape
                    }
                }
            }
            None => shape,
        }
    }

    /// What the kernel assumes of a shape (the built-in ones hold it): lanes that divide a K
    /// row's vec4s and sit in one subgroup, threads for at least one value group of V in whole
    /// subgroups, at most 1024, and splits within a dispatch's z.
    fn fits(&self, caps: &Caps, head_dim: u32) -> bool {
        let d4 = head_dim / 4;
        let lanes_ok = self.score_lanes == 1 || (caps.subgroup && self.score_lanes <= caps.min_subgroup_size);
        let threads_ok = (d4..=1024).contains(&self.threads)
            && (!caps.subgroup || self.threads.is_multiple_of(caps.max_subgroup_size));
        lanes_ok && threads_ok && d4.is_multiple_of(self.score_lanes) && self.max_splits <= 65535
    }

    /// Positions per tile.
    fn tile(&self) -> u32 {
        self.threads / self.score_lanes
    }
}

pub fn source(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, kv: KvType, shape: FlashShape) -> String {
    let defs = head_defs(h, opts, plan, shape.threads, true)
        .u32("MAX_SPLITS", shape.max_splits)
        .u32("MAX_HEADS", MAX_HEADS)
        .u32("SCORE_LANES", shape.score_lanes);
    let pieces = [
        reduce_lib(shape.subgroups),
        score_sum_lib(shape.score_lanes),
        "lib/attention_window",
        "lib/attention_combine",
    ];
    assemble("attention_flash", &defs, &[kv_libs(kv, shape.kv_u64), &pieces].concat())
}

pub struct AttentionFlash {
    bound: Bound,
    n_heads: u32,
    shape: FlashShape,
}

impl AttentionFlash {
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, b: &AttnBuffers) -> Result<AttentionFlash> {
        ensure!(
            h.n_heads <= MAX_HEADS,
            "{} query heads: the flash attention kernel takes {MAX_HEADS} at most",
            h.n_heads
        );
        let shape = FlashShape::for_adapter(&gpu.caps, h.head_dim);
        let k = Kernel::get(gpu, "attention_flash", source(h, opts, &b.plan.layout, b.kv, shape))?;
        // A merge counter per head, zeroed at creation and re-zeroed by the last split of each
        // step; then split results (max, sum, head_dim sums) per (head, split). One buffer serves
        // every layer (their attention dispatches run one after another) and every kernel of
        // this shape or a smaller one.
        let words = MAX_HEADS + h.n_heads * shape.max_splits * (h.head_dim + 2);
        let partials = gpu.scratch("attention flash partials", u64::from(words) * 4)?;
        let bound = k.bind_at(gpu, &b.entries(&[&partials]));
        Ok(AttentionFlash { bound, n_heads: h.n_heads, shape })
    }

    /// `rows` tokens, the one seeing the most positions `context` of them: one token is split
    /// over up to max_splits workgroups per head (a tile of positions each, or past max_splits
    /// tiles as few more as hold them, so that no split is left without positions), more
    /// tokens are not.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32, context: u32) {
        let splits = if rows == 1 { splits_for(context.div_ceil(self.shape.tile()), self.shape.max_splits) } else { 1 };
        self.bound.record(pass, [self.n_heads, rows, splits]);
    }
}

/// Splits of `tiles` tiles (the kernel gives each ceil(tiles / splits) of them): one tile each
/// up to `max` tiles, past it as few as hold them at the fewest tiles per split.
fn splits_for(tiles: u32, max: u32) -> u32 {
    let tiles = tiles.max(1);
    tiles.div_ceil(tiles.div_ceil(max))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// At most `max` splits, each with tiles to walk (the kernel's last split starts before the
    /// last tile), as few tiles per split as `max` allows.
    #[test]
    fn every_split_has_tiles() {
        for max in [1, 16, 64, 128] {
            for tiles in 1..2000 {
                let splits = splits_for(tiles, max);
                let per = tiles.div_ceil(splits);
                assert!(splits <= max && per == tiles.div_ceil(max), "{tiles} tiles, max {max}: {splits}");
                assert!((splits - 1) * per < tiles && splits * per >= tiles, "{tiles} tiles, max {max}: {splits}");
            }
        }
    }
}
