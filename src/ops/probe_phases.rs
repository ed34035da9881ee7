//! `shaders/probe_phases.wgsl`: what a dependent kernel would cost as a phase of one dispatch
//! (workgroups of the next phase spinning on a counter the previous phase raises) rather than
//! as a launch of its own (`probe_launch`), and whether each phase sees the plain stores of the
//! phase before. A GPU-only probe: it relies on workgroups starting in order, which CPU adapters
//! running workgroups on a few threads need not do quickly.

use anyhow::{ensure, Result};

use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

/// Loads a waiting workgroup spins before it gives up (a few ms on a GPU, where a phase takes
/// microseconds): a probe that cannot make progress reports it rather than hanging the device.
const SPIN_LIMIT: u32 = 1 << 16;

/// One probe shape: `phases` phases of `workgroups` workgroups of `threads` threads.
#[derive(Clone, Copy, Debug)]
pub struct PhaseShape {
    pub workgroups: u32,
    pub threads: u32,
    pub phases: u32,
}

pub fn source(s: &PhaseShape) -> String {
    let defs = Defs::new()
        .u32("G", s.workgroups)
        .u32("PHASES", s.phases)
        .u32("WG_THREADS", s.threads)
        .u32("SPIN_LIMIT", SPIN_LIMIT);
    assemble("probe_phases", &defs, &[])
}

pub struct ProbePhases {
    bound: Bound,
    shape: PhaseShape,
    counters: wgpu::Buffer,
}

/// The probe's counters after its dispatches so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PhaseCounters {
    /// Per phase, its workgroups counted done: all 0 between dispatches (the last workgroup
    /// resets them).
    pub done: Vec<u32>,
    /// Dispatches finished (each one's last workgroup starts the next generation).
    pub generation: u32,
    /// Waits that gave up (a phase's workgroups never all finished: workgroups out of order).
    pub gave_up: u32,
    /// Reads of the phase before that did not see its value (stores not visible yet).
    pub stale: u32,
}

impl ProbePhases {
    pub fn new(gpu: &Gpu, shape: PhaseShape) -> Result<ProbePhases> {
        let workgroups = shape.workgroups.checked_mul(shape.phases).filter(|&n| n <= super::MAX_GROUPS_PER_DIM);
        ensure!(workgroups.is_some() && shape.phases >= 2, "probe_phases: {shape:?} is not 2+ phases in one grid row");
        let counters = gpu.storage("phase counters", u64::from(shape.phases + 3) * 4)?;
        let values = u64::from(shape.workgroups * shape.phases * shape.threads);
        let data = gpu.storage("phase data", values * 4)?;
        let bound = Kernel::get(gpu, "probe_phases", source(&shape))?.bind(gpu, &[&counters, &data]);
        Ok(ProbePhases { bound, shape, counters })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, [self.shape.workgroups * self.shape.phases, 1, 1]);
    }

    /// The counters after every dispatch so far.
    pub fn counters(&self, gpu: &Gpu) -> Result<PhaseCounters> {
        let n = self.shape.phases as usize;
        let bytes = gpu.read_back(&self.counters, (n as u64 + 3) * 4)?;
        let words: &[u32] = bytemuck::cast_slice(&bytes);
        Ok(PhaseCounters {
            done: words[..n].to_vec(),
            generation: words[n],
            gave_up: words[n + 1],
            stale: words[n + 2],
        })
    }
}
