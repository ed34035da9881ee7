//! Kernel launchers: one file per kernel, named like its `shaders/NAME.wgsl`. Each builds its
//! pipelines and bind groups once (at load) and records dispatches into a compute pass.

pub mod argmax;
pub mod attention;
pub mod attention_coop;
pub mod attention_flash;
pub mod attention_grouped;
pub mod attention_plain;
pub mod attention_split;
pub mod dequant_f16;
pub mod embedding;
pub mod input_f16;
pub mod linear;
pub mod matmul;
pub mod plan;
pub mod probe_launch;
// A benchmark probe whose results are read back synchronously (`Gpu::read_back`: native only).
#[cfg(not(target_arch = "wasm32"))]
pub mod probe_phases;
pub mod probe_read;
pub mod qk_norm;
pub mod qkv_rope;
pub mod rmsnorm;
pub mod sample;
pub mod swiglu;
pub mod tune;
pub mod weight;

pub use weight::{Weight, WeightType};

/// Workgroups needed to cover `n` items `per` at a time.
pub fn groups(n: u32, per: u32) -> u32 {
    n.div_ceil(per)
}

/// Most workgroups one dimension of a dispatch may have (WebGPU's limit).
pub const MAX_GROUPS_PER_DIM: u32 = 65535;

/// A grid of at least `n` workgroups, 2-D when `n` exceeds one dimension's limit; kernels
/// number their workgroup `wg.y * num_workgroups.x + wg.x` and skip those past the end.
pub fn grid(n: u32) -> [u32; 3] {
    if n <= MAX_GROUPS_PER_DIM {
        [n, 1, 1]
    } else {
        [MAX_GROUPS_PER_DIM, n.div_ceil(MAX_GROUPS_PER_DIM), 1]
    }
}

/// The per-step values of `shaders/lib/common.wgsl`'s `Step`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Step {
    /// Rows (tokens) of the step, of any number of sequences.
    pub n_tokens: u32,
    /// Rows whose logits the step computes.
    pub n_out: u32,
    pub pad: [u32; 2],
}

impl Step {
    /// The uniform buffer every kernel reads its step from (one per model, written per submit).
    pub fn buffer(gpu: &crate::gpu::Gpu) -> anyhow::Result<wgpu::Buffer> {
        gpu.buffer("step", 16, wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST)
    }

    pub fn write(&self, gpu: &crate::gpu::Gpu, buffer: &wgpu::Buffer) {
        gpu.queue.write_buffer(buffer, 0, bytemuck::bytes_of(self));
    }
}
