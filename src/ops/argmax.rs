//! `shaders/argmax.wgsl`: greedy sampling on the GPU (one id comes back, not the logits).

use anyhow::Result;

use super::groups;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

/// Workgroups for a vocabulary: about 8 logits per thread, at most one candidate per thread of
/// the final workgroup.
fn workgroups(vocab: u32) -> u32 {
    groups(vocab, WG_THREADS * 8).min(WG_THREADS)
}

pub fn source(vocab: u32) -> String {
    let defs = Defs::new().u32("V", vocab).u32("GROUPS", workgroups(vocab)).u32("WG_THREADS", WG_THREADS);
    assemble("argmax", &defs, &["lib/argmax_reduce"])
}

pub struct Argmax {
    bound: Bound,
    groups: u32,
}

impl Argmax {
    pub fn new(gpu: &Gpu, vocab: u32, logits: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<Argmax> {
        let groups = workgroups(vocab);
        // Candidates and the counter (zeroed at creation; the last workgroup re-zeroes it).
        let candidates = gpu.storage("argmax candidates", u64::from(2 * groups + 1) * 4)?;
        let bound = Kernel::get(gpu, "argmax", source(vocab))?.bind(gpu, &[logits, out, &candidates]);
        Ok(Argmax { bound, groups })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, [self.groups, 1, 1]);
    }
}
