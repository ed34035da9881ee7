//! wginfer: Llama / Qwen2 / Mistral inference on wgpu with WGSL kernels.

pub mod gpu;
pub mod ops;
