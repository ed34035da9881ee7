//! The GPU layer: adapter and device selection, shader assembly, the pipeline cache, buffer
//! helpers, the driver's pipeline cache on disk (and where cache files live) and the timestamp
//! profiler. Everything above this module talks to wgpu through it.

pub mod cache_files;
mod context;
mod driver_cache;
mod pipelines;
pub mod profiler;
pub mod shader;

#[cfg(not(target_arch = "wasm32"))]
pub use context::list_adapters;
pub use context::{Caps, Gpu, GpuOptions};
pub use pipelines::{Bound, Kernel};
