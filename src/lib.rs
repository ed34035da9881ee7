//! wginfer: Llama / Qwen2 / Mistral inference on wgpu with WGSL kernels.
//!
//! Layers, bottom up: `gpu` (device, shaders, pipelines, profiler), `ops` (one launcher per
//! kernel), `kv` (the KV cache), `model` (config, tensor files, weights, forward pass),
//! `tokenizer` and `sampling`, and `engine`, which ties them together for the front ends.

pub mod cli;
pub mod engine;
pub mod gpu;
pub mod kv;
pub mod model;
pub mod ops;
pub mod sampling;
pub mod sched;
pub mod serve;
pub mod tokenizer;
