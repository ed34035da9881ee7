//! `shaders/input_f16.wgsl`: a step's input rows as f16, RMS-normalized when the kernel reading
//! them has a norm, for the tensor-core prefill core (lib/linear_coop) to load as fragments.

use anyhow::Result;

use super::linear::InputNorm;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

pub fn source(k: u32, norm_eps: Option<f32>) -> String {
    let defs = Defs::new()
        .u32("K", k)
        .bool("NORM", norm_eps.is_some())
        .f32("EPS", norm_eps.unwrap_or(0.0))
        .u32("WG_THREADS", WG_THREADS);
    assemble("input_f16", &defs, &["lib/reduce"])
}

pub struct InputF16(Bound);

impl InputF16 {
    /// `y[r] = f16(x[r])` over rows of `k` values, RMS-normalized with `norm` where given.
    pub fn new(gpu: &Gpu, k: u32, x: &wgpu::Buffer, y: &wgpu::Buffer, norm: Option<InputNorm>) -> Result<InputF16> {
        let kernel = Kernel::get(gpu, "input_f16", source(k, norm.map(|n| n.eps)))?;
        // Without a norm the gamma binding still needs a buffer; the shader never reads it.
        let gamma = norm.map_or(x, |n| n.weight);
        Ok(InputF16(kernel.bind(gpu, &[x, y, gamma])))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, [rows, 1, 1]);
    }
}
