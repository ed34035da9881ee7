//! `shaders/argmax.wgsl`: greedy sampling on the GPU, per row of logits (one id per row comes
//! back, not the logits).

use anyhow::Result;

use super::groups;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};
use crate::sampling::LOWEST_LOGIT;

const WG_THREADS: u32 = 256;

/// Workgroups for a vocabulary: about 8 logits per thread, at most one candidate per thread of
/// the final workgroup.
fn workgroups(vocab: u32) -> u32 {
    groups(vocab, WG_THREADS * 8).min(WG_THREADS)
}

pub fn source(vocab: u32) -> String {
    let defs = Defs::new().u32("V", vocab).u32("GROUPS", workgroups(vocab)).u32("WG_THREADS", WG_THREADS);
    assemble("argmax", &with_logit_value(defs), &["lib/argmax_reduce"])
}

/// `defs` with lib/logit_value and the host sampler's floor, so that the argmax and the sampler
/// never choose what `crate::sampling` never chooses.
pub fn with_logit_value(defs: Defs) -> Defs {
    defs.f32("LOWEST_LOGIT", LOWEST_LOGIT).piece("lib/logit_value")
}

pub struct Argmax {
    bound: Bound,
    groups: u32,
    max_rows: u32,
}

impl Argmax {
    /// The argmax of each of up to `max_rows` rows of `vocab` logits into `out[row]`.
    pub fn new(gpu: &Gpu, vocab: u32, max_rows: u32, logits: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<Argmax> {
        let groups = workgroups(vocab);
        // Per row: candidates and the counter (zeroed at creation; the last workgroup of a row
        // re-zeroes it).
        let words = u64::from(2 * groups + 1) * u64::from(max_rows.max(1));
        let candidates = gpu.storage("argmax candidates", words * 4)?;
        let bound = Kernel::get(gpu, "argmax", source(vocab))?.bind(gpu, &[logits, out, &candidates]);
        Ok(Argmax { bound, groups, max_rows })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        assert!(rows <= self.max_rows, "{rows} rows for an argmax of {}", self.max_rows);
        self.bound.record(pass, [self.groups, rows, 1]);
    }
}
