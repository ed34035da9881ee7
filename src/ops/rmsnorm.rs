//! `shaders/rmsnorm.wgsl`: RMSNorm with f32 accumulation.

use anyhow::Result;

use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

pub fn source(d: u32, eps: f32, last_row_only: bool) -> String {
    let defs =
        Defs::new().u32("D", d).f32("EPS", eps).bool("LAST_ROW_ONLY", last_row_only).u32("WG_THREADS", WG_THREADS);
    assemble("rmsnorm", &defs, &["lib/reduce"])
}

pub struct RmsNorm {
    bound: Bound,
    last_row_only: bool,
}

impl RmsNorm {
    /// y = rmsnorm(x) * gamma over rows of `d`; `last_row_only` writes only the step's last row
    /// (to y row 0).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        d: u32,
        eps: f32,
        last_row_only: bool,
        step: &wgpu::Buffer,
        x: &wgpu::Buffer,
        gamma: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> Result<RmsNorm> {
        let k = Kernel::get(gpu, "rmsnorm", source(d, eps, last_row_only))?;
        Ok(RmsNorm { bound: k.bind(gpu, &[step, x, gamma, y]), last_row_only })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        let n = if self.last_row_only { 1 } else { rows };
        self.bound.record(pass, [n, 1, 1]);
    }
}
