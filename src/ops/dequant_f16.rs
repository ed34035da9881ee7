//! `shaders/dequant_f16.wgsl`: a quantized weight part as f16 rows, for the prefill core of a
//! quantized weight to read as an f16 one's (`LinearConfig::dequant_once`).

use anyhow::Result;

use super::WeightType;
use crate::gpu::shader::{assemble, Defs};
use crate::gpu::{Bound, Gpu, Kernel};

const WG_THREADS: u32 = 256;
/// Enough workgroups to fill a large GPU; each thread loops over the rest.
const MAX_WORKGROUPS: u32 = 4096;

/// The kernel for an `[n, k]` part of type `weight` stored row after row.
pub fn source(weight: WeightType, n: u32, k: u32) -> String {
    let defs = Defs::new().u32("GROUPS", groups(n, k)).u32("WG_THREADS", WG_THREADS);
    assemble("dequant_f16", &defs, weight.libs())
}

/// Runs of 8 values (`w_load8`) in the part; `k` is a multiple of 8 (`LinearKernels::new`).
fn groups(n: u32, k: u32) -> u32 {
    n * (k / 8)
}

pub struct DequantF16 {
    bound: Bound,
    workgroups: u32,
}

impl DequantF16 {
    /// `y = f16(w)` for the `[n, k]` part `w` of type `weight`; `y` holds `n * k` f16 values.
    pub fn new(
        gpu: &Gpu,
        weight: WeightType,
        n: u32,
        k: u32,
        w: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> Result<DequantF16> {
        let kernel = Kernel::get(gpu, "dequant_f16", source(weight, n, k))?;
        let workgroups = groups(n, k).div_ceil(WG_THREADS).clamp(1, MAX_WORKGROUPS);
        Ok(DequantF16 { bound: kernel.bind(gpu, &[w, y]), workgroups })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.record(pass, [self.workgroups, 1, 1]);
    }
}
