//! `shaders/rmsnorm.wgsl`: RMSNorm with f32 accumulation.

use anyhow::Result;

use super::plan::{Plan, PlanLayout};
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;

/// The rows a norm runs over.
#[derive(Clone, Copy)]
pub enum NormRows<'a> {
    /// Every row of the step, y row r from x row r.
    All,
    /// Every row of the step added onto y row r (a post-norm onto the residual, Gemma).
    AddAll,
    /// The step's output rows (the plan's), y row i from x row out_row(i): the final norm.
    Outputs(&'a Plan),
}

/// The kernel over every row, or gathering the output rows of plans laid out as `gather`;
/// `accumulate`: y += instead of y =.
pub fn source(d: u32, eps: f32, gather: Option<&PlanLayout>, accumulate: bool) -> String {
    let defs = Defs::new().u32("D", d).f32("EPS", eps).u32("WG_THREADS", WG_THREADS).bool("ACCUMULATE", accumulate);
    match gather {
        None => assemble("rmsnorm", &defs, &["lib/reduce", "lib/norm_rows_all"]),
        Some(layout) => assemble("rmsnorm", &layout.defs(defs), &["lib/reduce", "lib/norm_rows_gather"]),
    }
}

/// What an `RmsNorm` reads and writes.
pub struct NormBuffers<'a> {
    pub x: &'a wgpu::Buffer,
    pub gamma: &'a wgpu::Buffer,
    pub y: &'a wgpu::Buffer,
}

pub struct RmsNorm(Bound);

impl RmsNorm {
    /// y = rmsnorm(x) * gamma (or y += with `NormRows::AddAll`) over rows of `d`.
    pub fn new(gpu: &Gpu, d: u32, eps: f32, rows: NormRows, b: &NormBuffers) -> Result<RmsNorm> {
        let gather = match rows {
            NormRows::All | NormRows::AddAll => None,
            NormRows::Outputs(plan) => Some(&plan.layout),
        };
        let k = Kernel::get(gpu, "rmsnorm", source(d, eps, gather, matches!(rows, NormRows::AddAll)))?;
        let mut buffers = vec![b.x, b.gamma, b.y];
        if let NormRows::Outputs(plan) = rows {
            buffers.push(&plan.buffer);
        }
        Ok(RmsNorm(k.bind(gpu, &buffers)))
    }

    /// Normalizes `rows` rows (the step's rows, or its outputs).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, rows: u32) {
        self.0.record(pass, [rows, 1, 1]);
    }
}
