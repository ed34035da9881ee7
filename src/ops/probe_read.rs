//! `shaders/probe_read.wgsl`: streams a buffer once, to measure this adapter's read bandwidth
//! (the limit `wginfer bench kernels` reports memory-bound kernels against).

use anyhow::Result;

use super::grid;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;
const PER_THREAD: u32 = 8;

pub fn source() -> String {
    assemble("probe_read", &Defs::new().u32("PER_THREAD", PER_THREAD).u32("WG_THREADS", WG_THREADS), &[])
}

pub struct ProbeRead {
    bound: Bound,
    groups: u32,
    /// Bytes one dispatch reads.
    pub bytes: u64,
}

impl ProbeRead {
    /// A probe over `src`, whose size is rounded down to whole workgroups.
    pub fn new(gpu: &Gpu, src: &wgpu::Buffer, sink: &wgpu::Buffer) -> Result<ProbeRead> {
        let per_group = u64::from(WG_THREADS * PER_THREAD) * 16;
        let groups = (src.size() / per_group) as u32;
        anyhow::ensure!(groups > 0, "probe buffer of {} bytes is too small", src.size());
        let bound = Kernel::get(gpu, "probe_read", source())?.bind(gpu, &[src, sink]);
        Ok(ProbeRead { bound, groups, bytes: u64::from(groups) * per_group })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, grid(self.groups));
    }
}
