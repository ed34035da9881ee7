//! The GPU layer: adapter and device selection, shader assembly, the pipeline cache, buffer
//! helpers, the driver's pipeline cache on disk and the timestamp profiler. Everything above this module talks to wgpu through it.

mod context;
mod driver_cache;
mod pipelines;
pub mod profiler;
pub mod shader;

#[cfg(not(target_arch = "wasm32"))]
pub use context::list_adapters;
pub use context::{Caps, Gpu, GpuOptions};
pub use driver_cache::cache_dir;
pub use pipelines::{Bound, Kernel};
