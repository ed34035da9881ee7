//! `shaders/probe_phases.wgsl`: what a dependent kernel would cost as a phase of one dispatch
//! (workgroups of the next phase spinning on a counter the previous phase raises) rather than
//! as a launch of its own (`probe_launch`), and whether each phase sees the plain stores of the
//! phase before. A GPU-only probe: it relies on workgroups starting in order, which CPU adapters
//! running workgroups on a few threads need not do quickly.

use anyhow::{ensure, Result};

use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

/// Loads a waiting workgroup spins before it gives up: a probe that cannot make progress reports
/// it rather than hanging the device. On a GPU a few ms, where a phase takes microseconds; a CPU
/// adapter's workgroups are tasks of a thread pool that the OS may set aside while another spins
/// (the kernel test gave up three waits at 2^16 loads on a busy 2-core machine), so there a
/// fraction of a second.
fn spin_limit(cpu: bool) -> u32 {
    if cpu {
        1 << 26
    } else {
        1 << 16
    }
}

/// One probe shape: `phases` phases of `workgroups` workgroups of `threads` threads.
#[derive(Clone, Copy, Debug)]
pub struct PhaseShape {
    pub workgroups: u32,
    pub threads: u32,
    pub phases: u32,
}

/// The probe for `s` on a CPU adapter (`cpu`) or a GPU.
pub fn source(s: &PhaseShape, cpu: bool) -> String {
    let defs = Defs::new()
        .u32("G", s.workgroups)
        .u32("PHASES", s.phases)
        .u32("WG_THREADS", s.threads)
        .u32("SPIN_LIMIT", spin_limit(cpu));
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
        let bound = Kernel::get(gpu, "probe_phases", source(&shape, gpu.caps.cpu))?.bind(gpu, &[&counters, &data]);
        Ok(ProbePhases { bound, shape, counters })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, [self.shape.workgroups * self.shape.phases, 1, 1]);
    }

    /// The counters after every dispatch so far.
    pub fn counters(&self, gpu: &Gpu) -> Result<PhaseCounters> {
        let n = self.shape.phases as usize;
        let bytes = gpu.read_back(&self.counters, self.counters.size())?;
        let words: &[u32] = bytemuck::cast_slice(&bytes);
        Ok(PhaseCounters {
            done: words[..n].to_vec(),
            generation: words[n],
            gave_up: words[n + 1],
            stale: words[n + 2],
        })
    }
}
