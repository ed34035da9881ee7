//! `shaders/attention_flash.wgsl`: tiled online-softmax attention (long contexts).

use anyhow::Result;

use super::attention::{head_defs, AttnBuffers};
use super::qkv_rope::HeadShape;
use crate::gpu::shader::assemble;
use crate::gpu::{Bound, Gpu, Kernel};

pub const WG_THREADS: u32 = 256;

pub fn source(h: &HeadShape) -> String {
    assemble("attention_flash", &head_defs(h, WG_THREADS), &["lib/reduce", "lib/attention_combine"])
}

pub struct AttentionFlash(Bound);

impl AttentionFlash {
    pub fn new(gpu: &Gpu, h: &HeadShape, b: &AttnBuffers) -> Result<AttentionFlash> {
        let k = Kernel::get(gpu, "attention_flash", source(h))?;
        Ok(AttentionFlash(k.bind(gpu, &b.list())))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_heads: u32, rows: u32) {
        self.0.record(pass, [n_heads, rows, 1]);
    }
}
