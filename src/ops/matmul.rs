//! `shaders/matmul.wgsl`: y = x W^T (or y += x W^T, the fused residual add), for every part of a
//! weight that is split over several bindings.

use anyhow::Result;

use super::linear::{F16Rows, LinearConfig, LinearIo, LinearParts, Rows};
use super::Weight;
use crate::gpu::shader::Defs;
use crate::gpu::Gpu;

pub struct Matmul(LinearParts);

/// Kernel-specific constants for one part of a weight with `n_total` rows starting at `row_lo`.
pub fn defs(accumulate: bool, n_total: u32, row_lo: u32) -> Defs {
    Defs::new().bool("ACCUMULATE", accumulate).u32("Y_STRIDE", n_total).u32("N_OFFSET", row_lo)
}

impl Matmul {
    /// `y[rows, w.rows] (+)= x[rows, w.cols] W^T` over the step's `rows`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        cfg: &LinearConfig,
        w: &Weight,
        step: &wgpu::Buffer,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        accumulate: bool,
        rows: Rows,
    ) -> Result<Matmul> {
        Self::with_f16_input(gpu, cfg, w, (step, x, None), y, accumulate, rows)
    }

    /// `new`, where `input`'s third member, where given, holds x's rows as f16, written by the
    /// kernel before (`F16Rows::x`).
    pub fn with_f16_input(
        gpu: &Gpu,
        cfg: &LinearConfig,
        w: &Weight,
        input: (&wgpu::Buffer, &wgpu::Buffer, Option<&wgpu::Buffer>),
        y: &wgpu::Buffer,
        accumulate: bool,
        rows: Rows,
    ) -> Result<Matmul> {
        let (step, x, x_f16) = input;
        let io = LinearIo { step, x, rest: vec![y], norm: None, f16: F16Rows { x: x_f16, out: None } };
        let parts = LinearParts::new(gpu, cfg, "matmul", w, rows, &io, |p| Ok(defs(accumulate, w.rows, p.row_lo)))?;
        Ok(Matmul(parts))
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, rows);
    }
}
