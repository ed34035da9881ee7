//! `shaders/attention_flash.wgsl`: tiled online-softmax attention (long contexts); a decode
//! token's positions are split over up to MAX_SPLITS workgroups per head and merged.

use anyhow::Result;

use super::attention::{head_defs, AttnBuffers, AttnOptions};
use super::plan::PlanLayout;
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Gpu, Kernel};

pub const WG_THREADS: u32 = 256;
/// A decode step's positions are spread over at most this many workgroups per head.
pub const MAX_SPLITS: u32 = 32;

pub fn source(h: &HeadShape, opts: AttnOptions, plan: &PlanLayout) -> String {
    // One lane per score: a tile is one position per thread.
    let defs = head_defs(h, opts, plan, WG_THREADS).u32("MAX_SPLITS", MAX_SPLITS).u32("SCORE_LANES", 1);
    assemble("attention_flash", &defs, &["lib/reduce", "lib/score_sum_one", "lib/attention_combine"])
}

pub struct AttentionFlash {
    bound: Bound,
    n_heads: u32,
}

impl AttentionFlash {
    pub fn new(gpu: &Gpu, h: &HeadShape, opts: AttnOptions, b: &AttnBuffers) -> Result<AttentionFlash> {
        let k = Kernel::get(gpu, "attention_flash", source(h, opts, &b.plan.layout))?;
        // Split results (max, sum, head_dim sums) per (head, split), then a counter per head,
        // zeroed at creation and re-zeroed by the last split of each step.
        let words = h.n_heads * MAX_SPLITS * (h.head_dim + 2) + h.n_heads;
        let partials = gpu.storage("attention partials", u64::from(words) * 4)?;
        let [q, kc, vc, o, plan] = b.list();
        let bound = k.bind(gpu, &[q, kc, vc, o, plan, &partials]);
        Ok(AttentionFlash { bound, n_heads: h.n_heads })
    }

    /// `rows` tokens, the one seeing the most positions `context` of them: one token is split
    /// over up to MAX_SPLITS workgroups per head (a tile of positions each), more tokens are not.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32, context: u32) {
        let splits = if rows == 1 { context.div_ceil(WG_THREADS).clamp(1, MAX_SPLITS) } else { 1 };
        self.bound.record(pass, [self.n_heads, rows, splits]);
    }
}
