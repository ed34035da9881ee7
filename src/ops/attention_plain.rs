//! `shaders/attention_plain.wgsl`: every score of a row in workgroup memory (short contexts).

use anyhow::Result;

use super::attention::{head_defs, AttnBuffers, AttnOptions};
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Caps, Gpu, Kernel};

pub const WG_THREADS: u32 = 256;

/// Workgroup memory for contexts up to `max_len`: the scores, the query, a row of reduction
/// values and a vec4 of partial sums per thread.
pub fn workgroup_bytes(head_dim: u32, max_len: u32) -> u32 {
    4 * (max_len + head_dim + WG_THREADS) + 16 * WG_THREADS
}

/// Lanes per score: 4 adjacent lanes read a K row together where subgroup shuffles can add
/// their parts (the best of 2, 4 and 8 for a 512-token prefill on the H200, docs/PERF.md),
/// fewer where HD / 4 is not a multiple of 4; one lane without subgroups.
pub fn score_lanes(caps: &Caps, head_dim: u32) -> u32 {
    match caps.subgroup {
        true => {
            [4, 2].into_iter().find(|&l| (head_dim / 4).is_multiple_of(l) && l <= caps.min_subgroup_size).unwrap_or(1)
        }
        false => 1,
    }
}

/// `max_len`: the longest context this kernel is asked to serve (the router's threshold);
/// `score_lanes` from [`score_lanes`].
pub fn source(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout, max_len: u32, score_lanes: u32) -> String {
    let sum = if score_lanes > 1 { "lib/score_sum_shuffle" } else { "lib/score_sum_one" };
    assemble(
        "attention_plain",
        &head_defs(h, opts, plan, WG_THREADS).u32("PLAIN_MAX", max_len).u32("SCORE_LANES", score_lanes),
        &["lib/reduce", sum, "lib/attention_combine"],
    )
}

pub struct AttentionPlain(Bound);

impl AttentionPlain {
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, max_len: u32, b: &AttnBuffers) -> Result<AttentionPlain> {
        let source = source(h, opts, &b.plan.layout, max_len, score_lanes(&gpu.caps, h.head_dim));
        let k = Kernel::get(gpu, "attention_plain", source)?;
        Ok(AttentionPlain(k.bind(gpu, &b.list())))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_heads: u32, rows: u32) {
        self.0.record(pass, [n_heads, rows, 1]);
    }
}
