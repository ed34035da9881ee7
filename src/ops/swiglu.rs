//! `shaders/swiglu.wgsl`: gate and up projections in one pass, then SwiGLU.

use anyhow::Result;

use super::linear::{BoundLinear, InputNorm, LinearConfig, LinearKernels, LinearShape, Rows};
use super::Weight;
use crate::gpu::shader::Defs;
use crate::gpu::Gpu;

pub struct SwiGlu(BoundLinear);

impl SwiGlu {
    /// `w` interleaves gate and up rows (row 2i = gate i, 2i+1 = up i); h gets w.rows / 2 columns.
    /// With `norm`, x is RMS-normalized on load (the MLP norm fused in).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        cfg: &LinearConfig,
        w: &Weight,
        step: &wgpu::Buffer,
        x: &wgpu::Buffer,
        h: &wgpu::Buffer,
        norm: Option<InputNorm>,
    ) -> Result<SwiGlu> {
        anyhow::ensure!(w.rows.is_multiple_of(2), "weight {}: gate/up rows must come in pairs", w.name);
        let shape = LinearShape { k: w.cols, n: w.rows, rows: Rows::Tokens, norm_eps: norm.map(|n| n.eps) };
        let k = LinearKernels::new(gpu, "swiglu", &Defs::new(), w.ty, &shape, cfg)?;
        Ok(SwiGlu(BoundLinear::new(gpu, k, &[step, x, w.single()?, h], norm)?))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, rows);
    }
}

/// Row order of the fused weight as indices into the stacked rows [Wgate; Wup]: gate and up
/// rows interleaved.
pub fn interleaved_row_order(intermediate: usize) -> Vec<usize> {
    (0..2 * intermediate).map(|r| if r % 2 == 0 { r / 2 } else { intermediate + r / 2 }).collect()
}
