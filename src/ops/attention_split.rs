//! `shaders/attention_split.wgsl`: decode rows over long contexts, a KV group's query heads in
//! one workgroup and the positions split over up to MAX_SPLITS workgroups per (row, KV head),
//! merged by the last of them.

use anyhow::Result;

use super::attention::{head_defs, kv_libs, kv_u64, score_lanes, score_sum_lib, AttnBuffers, AttnOptions};
use super::linear::GEMV_MAX_ROWS;
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Caps, Gpu, Kernel};
use crate::kv::KvType;

pub const WG_THREADS: u32 = 256;
/// A row's positions are spread over at most this many workgroups per KV head.
pub const MAX_SPLITS: u32 = 32;
/// Steps of at most this many rows (decode rows) are split; their partial results have room.
pub const MAX_ROWS: u32 = 8;
// o's f16 copy is left unwritten (`head_defs`): the o projection of such a step runs a GEMV core.
const _: () = assert!(MAX_ROWS <= GEMV_MAX_ROWS);
/// KV heads the kernel takes: the merge counters (MAX_ROWS of them per KV head) lie at the start
/// of the partials buffer whatever the heads, so kernels of every shape share one buffer.
pub const MAX_KV_HEADS: u32 = 64;
/// Query heads per KV head the kernel takes: 32 threads reduce each head's chunk scores.
pub const MAX_GROUP: u32 = WG_THREADS / 32;
/// vec4s of K a lane holds for a chunk: the chunk's rounds of scores are loaded at once.
const K_REGISTERS: u32 = 16;

/// Per-adapter choices of the split kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitShape {
    /// Lanes per score (`score_lanes`): WG_THREADS / score_lanes positions a round.
    pub score_lanes: u32,
    /// K and V read as pairs of u64s (`kv_libs`).
    pub kv_u64: bool,
    /// Rounds of scores per chunk at most: every round is unrolled for every head of a group.
    pub max_rounds: u32,
}

impl SplitShape {
    pub fn for_adapter(caps: &Caps, head_dim: u32) -> SplitShape {
        // A CPU adapter gains nothing from loads in flight together; one round compiles faster
        // on lavapipe.
        let max_rounds = if caps.cpu { 1 } else { 4 };
        SplitShape { score_lanes: score_lanes(caps, head_dim), kv_u64: kv_u64(caps), max_rounds }
    }

    /// Positions per chunk: as many rounds of WG_THREADS / score_lanes positions as keep a
    /// lane's K values within K_REGISTERS vec4s, `max_rounds` at most.
    pub fn chunk(&self, head_dim: u32) -> u32 {
        let per_lane = head_dim / 4 / self.score_lanes;
        WG_THREADS / self.score_lanes * (K_REGISTERS / per_lane).clamp(1, self.max_rounds)
    }

    /// Workgroup memory of the kernel for heads `h`.
    pub fn workgroup_bytes(&self, h: &HeadShape) -> u32 {
        let group = h.n_heads / h.n_kv_heads;
        let chunk = self.chunk(h.head_dim);
        // qs, scores, slot_of, red, chunk_max, partial, weight_part, split_max and split_sum,
        // finished.
        4 * (group * h.head_dim + group * chunk + chunk + WG_THREADS + group + 4 * WG_THREADS + WG_THREADS)
            + 8 * group * MAX_SPLITS
            + 4
    }
}

pub fn source(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, kv: KvType, shape: SplitShape) -> String {
    let defs = head_defs(h, opts, plan, WG_THREADS, false)
        .u32("MAX_SPLITS", MAX_SPLITS)
        .u32("MAX_ROWS", MAX_ROWS)
        .u32("MAX_KV_HEADS", MAX_KV_HEADS)
        .u32("SCORE_LANES", shape.score_lanes)
        .u32("CHUNK", shape.chunk(h.head_dim));
    let pieces = [score_sum_lib(shape.score_lanes), "lib/attention_window"];
    assemble("attention_split", &defs, &[kv_libs(kv, shape.kv_u64), &pieces].concat())
}

pub struct AttentionSplit {
    bound: Bound,
    n_kv_heads: u32,
    /// Positions per chunk (`SplitShape::chunk`).
    chunk: u32,
}

impl AttentionSplit {
    /// `None` where a KV group has more than MAX_GROUP query heads, there are more than
    /// MAX_KV_HEADS KV heads, or the kernel's workgroup memory does not fit the adapter.
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, b: &AttnBuffers) -> Result<Option<AttentionSplit>> {
        let shape = SplitShape::for_adapter(&gpu.caps, h.head_dim);
        let fits = shape.workgroup_bytes(h) <= gpu.caps.max_workgroup_storage;
        if h.n_heads / h.n_kv_heads > MAX_GROUP || h.n_kv_heads > MAX_KV_HEADS || !fits {
            return Ok(None);
        }
        let k = Kernel::get(gpu, "attention_split", source(h, opts, &b.plan.layout, b.kv, shape))?;
        // The merge counters, zeroed at creation and re-zeroed by the merge of each step; then
        // results per (row, head, split): max, weight sum, head_dim sums. One buffer serves
        // every layer (their attention dispatches run one after another) and every kernel of
        // this shape or a smaller one.
        let words = MAX_ROWS * (MAX_KV_HEADS + h.n_heads * MAX_SPLITS * (h.head_dim + 2));
        let partials = gpu.scratch("attention split partials", u64::from(words) * 4)?;
        let bound = k.bind_at(gpu, &b.entries(&[&partials]));
        Ok(Some(AttentionSplit { bound, n_kv_heads: h.n_kv_heads, chunk: shape.chunk(h.head_dim) }))
    }

    /// `rows` tokens, the one seeing the most positions `context` of them: up to MAX_ROWS rows
    /// split into a chunk per workgroup (MAX_SPLITS at most), more rows not split.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32, context: u32) {
        let splits = match rows <= MAX_ROWS {
            true => context.div_ceil(self.chunk).clamp(1, MAX_SPLITS),
            false => 1,
        };
        self.bound.record(pass, [self.n_kv_heads, rows, splits]);
    }
}
