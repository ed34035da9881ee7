//! `shaders/sample.wgsl`: temperature / top-k / top-p sampling on the GPU, one workgroup per
//! row of logits, each row with its own parameters.

use anyhow::Result;

use super::argmax::with_logit_value;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};
use crate::sampling::SamplingParams;

const WG_THREADS: u32 = 256;

/// Candidates kept in workgroup memory (8 bytes each): up to 2048 (two whole buckets of a 256k
/// vocabulary with flat logits), fewer where the adapter has less workgroup memory than the
/// kernel's other 6 KiB plus 16 KiB; more candidates fall back to scanning the vocabulary.
pub fn candidates_for(max_workgroup_storage: u32) -> u32 {
    let room = max_workgroup_storage.saturating_sub(6 << 10) / 8;
    if room < 64 {
        return 1;
    }
    (1 << room.ilog2()).min(2048)
}

pub fn source(vocab: u32, candidates: u32) -> String {
    let defs = Defs::new().u32("V", vocab).u32("WG_THREADS", WG_THREADS).u32("CAND_MAX", candidates);
    assemble("sample", &with_logit_value(defs), &["lib/reduce", "lib/argmax_reduce"])
}

/// One row's parameters (`Params` in the shader).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct SampleParams {
    pub temperature: f32,
    pub top_p: f32,
    pub top_k: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub counter: u32,
    pub pad: [u32; 2],
}

impl SampleParams {
    /// The draw for step `counter` of a generation with `p`.
    pub fn new(p: &SamplingParams, counter: u32) -> SampleParams {
        SampleParams {
            // The kernel multiplies by 1 / temperature: 0 (its greedy rows) where that overflows.
            temperature: if p.draws() { p.temperature } else { 0.0 },
            top_p: p.top_p,
            top_k: p.top_k.min(u32::MAX as usize) as u32,
            seed_lo: p.seed as u32,
            seed_hi: (p.seed >> 32) as u32,
            counter,
            pad: [0; 2],
        }
    }
}

pub struct Sample {
    bound: Bound,
    params: wgpu::Buffer,
    max_rows: u32,
}

impl Sample {
    /// Samples up to `max_rows` rows of `vocab` logits each into `out[row]`.
    pub fn new(gpu: &Gpu, vocab: u32, max_rows: u32, logits: &wgpu::Buffer, out: &wgpu::Buffer) -> Result<Sample> {
        let bytes = u64::from(max_rows.max(1)) * std::mem::size_of::<SampleParams>() as u64;
        let params = gpu.buffer("sample_params", bytes, wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST)?;
        let bound = Kernel::get(gpu, "sample", source(vocab, candidates_for(gpu.caps.max_workgroup_storage)))?
            .bind(gpu, &[&params, logits, out]);
        Ok(Sample { bound, params, max_rows })
    }

    /// Sets the next draw's parameters, one per row (before the submit that records it).
    pub fn set(&self, gpu: &Gpu, rows: &[SampleParams]) {
        assert!(rows.len() <= self.max_rows as usize, "{} rows for a sampler of {}", rows.len(), self.max_rows);
        gpu.queue.write_buffer(&self.params, 0, bytemuck::cast_slice(rows));
    }

    /// Samples the first `rows` rows.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.bound.record(pass, [rows, 1, 1]);
    }
}
