//! `shaders/argmax.wgsl`: greedy sampling on the GPU (one id comes back, not the logits).

use anyhow::Result;

use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

pub fn source(vocab: u32) -> String {
    assemble("argmax", &Defs::new().u32("V", vocab).u32("WG_THREADS", WG_THREADS), &["lib/argmax_reduce"])
}

pub struct Argmax(Bound);

impl Argmax {
    pub fn new(gpu: &Gpu, vocab: u32, logits: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<Argmax> {
        Ok(Argmax(Kernel::get(gpu, "argmax", source(vocab))?.bind(gpu, &[logits, out])))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.0.record(pass, [1, 1, 1]);
    }
}
