//! wginfer: Llama / Qwen2 / Mistral inference on wgpu with WGSL kernels.
//!
//! Layers, bottom up: `gpu` (device, shaders, pipelines, profiler), `ops` (one launcher per
//! kernel), `kv` (the KV cache), `model` (config, tensor files, weights, forward pass),
//! `tokenizer` and `sampling`, and `engine`, which ties them together for the front ends.

#[cfg(not(target_arch = "wasm32"))]
pub mod cli;
pub mod engine;
pub mod gpu;
pub mod kv;
pub mod model;
pub mod ops;
pub mod sampling;
pub mod sched;
#[cfg(not(target_arch = "wasm32"))]
pub mod serve;
pub mod tokenizer;

/// A monotonic clock: std's, or the page's in a browser (std's panics on wasm32).
#[cfg(not(target_arch = "wasm32"))]
pub(crate) use std::time::Instant;
#[cfg(target_arch = "wasm32")]
pub(crate) use web_time::Instant;
