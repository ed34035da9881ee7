//! `shaders/probe_launch.wgsl`: what one dependent kernel launch costs on this adapter (a
//! decode step is ~100 of them), in the shapes that tell its parts apart: a single workgroup,
//! a decode-sized grid, a uniform read, two pipelines taking turns.

use anyhow::Result;

use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

/// One probe shape.
#[derive(Clone, Copy, Debug)]
pub struct LaunchShape {
    pub workgroups: u32,
    pub threads: u32,
    /// Read the per-step uniform.
    pub read_step: bool,
}

pub fn source(s: &LaunchShape, inc: u32) -> String {
    let defs = Defs::new().u32("INC", inc).bool("READ_STEP", s.read_step).u32("WG_THREADS", s.threads);
    assemble("probe_launch", &defs, &[])
}

pub struct ProbeLaunch {
    bound: Bound,
    workgroups: u32,
}

impl ProbeLaunch {
    /// Each dispatch adds `inc` (plus the step's first `pad` word with `read_step`) to `counter[0]`; a
    /// different `inc` is a different pipeline.
    pub fn new(
        gpu: &Gpu,
        s: &LaunchShape,
        inc: u32,
        counter: &wgpu::Buffer,
        step: &wgpu::Buffer,
    ) -> Result<ProbeLaunch> {
        let bound = Kernel::get(gpu, "probe_launch", source(s, inc))?.bind(gpu, &[counter, step]);
        Ok(ProbeLaunch { bound, workgroups: s.workgroups })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, [self.workgroups, 1, 1]);
    }
}
