//! `shaders/attention_plain.wgsl`: every score of a row in workgroup memory (short contexts).

use anyhow::Result;

use super::attention::{head_defs, AttnBuffers};
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Gpu, Kernel};

pub const WG_THREADS: u32 = 256;

/// Workgroup memory for contexts up to `max_len`: the scores, the query, a row of reduction
/// values and a vec4 of partial sums per thread.
pub fn workgroup_bytes(head_dim: u32, max_len: u32) -> u32 {
    4 * (max_len + head_dim + WG_THREADS) + 16 * WG_THREADS
}

/// `max_len`: the longest context this kernel is asked to serve (the router's threshold).
pub fn source(h: &HeadShape, max_len: u32) -> String {
    assemble(
        "attention_plain",
        &head_defs(h, WG_THREADS).u32("PLAIN_MAX", max_len),
        &["lib/reduce", "lib/attention_combine"],
    )
}

pub struct AttentionPlain(Bound);

impl AttentionPlain {
    pub fn new(gpu: &Gpu, h: &HeadShape, max_len: u32, b: &AttnBuffers) -> Result<AttentionPlain> {
        let k = Kernel::get(gpu, "attention_plain", source(h, max_len))?;
        Ok(AttentionPlain(k.bind(gpu, &b.list())))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_heads: u32, rows: u32) {
        self.0.record(pass, [n_heads, rows, 1]);
    }
}
