//! Adapter selection and the device: real limits, detected features, counted buffer creation.

use anyhow::{anyhow, bail, Context, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::driver_cache::DriverCache;
use super::pipelines::PipelineCache;

/// How to pick and configure the adapter.
#[derive(Clone, Debug, Default)]
pub struct GpuOptions {
    /// Index into the adapter list (`wginfer info` prints it); `None` picks the best one.
    pub adapter: Option<usize>,
    /// Backends to search; `None` takes `WGPU_BACKEND`, else all.
    pub backends: Option<wgpu::Backends>,
    /// Treat the adapter as having no SHADER_F16 / SUBGROUP (tests the portable path).
    pub portable: bool,
    /// Do not use cooperative matrices even where the adapter has them (tests the tiled core).
    pub no_coop_matrix: bool,
    /// Lower the storage-binding limit the engine plans with (tests tensor splitting).
    pub max_binding_override: Option<u64>,
    /// Bytes of GPU memory the engine may ask for in all (`--gpu-memory`): a buffer past it is
    /// an out-of-memory error naming the buffer, as the adapter's own would be.
    pub memory_cap: Option<u64>,
}

/// What wgpu reports outside an error scope, kept instead of its default handler's panic: the
/// first error, and why the device was lost. `Gpu::check` turns them into errors.
#[derive(Default)]
struct Faults {
    error: Mutex<Option<String>>,
    lost: Mutex<Option<String>>,
}

impl Faults {
    fn keep(slot: &Mutex<Option<String>>, what: String) {
        if let Ok(mut s) = slot.lock() {
            s.get_or_insert(what);
        }
    }
}

/// What the adapter can do, as the kernels see it.
#[derive(Clone, Copy, Debug, Default)]
pub struct Caps {
    pub shader_f16: bool,
    pub subgroup: bool,
    pub min_subgroup_size: u32,
    pub max_subgroup_size: u32,
    pub timestamp: bool,
    pub timestamp_in_pass: bool,
    /// Cooperative matrices (16x16 f16, f32 accumulation) are enabled on the device.
    pub coop_matrix: bool,
    /// Largest range one storage binding may cover (bytes).
    pub max_binding: u64,
    pub max_buffer: u64,
    pub max_workgroup_storage: u32,
    pub storage_offset_alignment: u32,
    /// 64-bit integers in shaders (SHADER_INT64; requested on CPU adapters only, where the rows
    /// core loads through them).
    pub int64: bool,
    /// A CPU adapter (lavapipe, llvmpipe): each workgroup runs as a loop over its invocations,
    /// a barrier is a switch between them.
    pub cpu: bool,
}

/// The device, its queue, what it can do, and the cache of compiled kernels.
pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub features: wgpu::Features,
    pub limits: wgpu::Limits,
    pub caps: Caps,
    pub(super) pipelines: Mutex<PipelineCache>,
    pub(super) driver_cache: Option<DriverCache>,
    buffers_created: AtomicU64,
    bytes_allocated: AtomicU64,
    memory_cap: Option<u64>,
    faults: Arc<Faults>,
    scratch: Mutex<HashMap<&'static str, wgpu::Buffer>>,
}

/// Every adapter wgpu finds on `backends` (`None`: those `WGPU_BACKEND` allows, all when unset).
#[cfg(not(target_arch = "wasm32"))]
pub fn list_adapters(backends: Option<wgpu::Backends>) -> Vec<wgpu::Adapter> {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
    if let Some(b) = backends {
        desc.backends = b;
    }
    let instance = wgpu::Instance::new(desc);
    pollster::block_on(instance.enumerate_adapters(wgpu::Backends::all()))
}

#[cfg(not(target_arch = "wasm32"))]
fn adapter_rank(info: &wgpu::AdapterInfo) -> u32 {
    use wgpu::DeviceType::*;
    match info.device_type {
        DiscreteGpu => 0,
        IntegratedGpu => 1,
        VirtualGpu => 2,
        Other => 3,
        Cpu => 4,
    }
}

impl Gpu {
    #[cfg(not(target_arch = "wasm32"))]
    pub fn new(opts: &GpuOptions) -> Result<Gpu> {
        let mut adapters = list_adapters(opts.backends);
        if adapters.is_empty() {
            bail!("no GPU adapter found (install a Vulkan driver, e.g. mesa-vulkan-drivers, or set WGPU_BACKEND)");
        }
        let adapter = match opts.adapter {
            Some(i) if i < adapters.len() => adapters.swap_remove(i),
            Some(i) => bail!("--adapter {i}: only {} adapter(s) found (see `wginfer info`)", adapters.len()),
            None => {
                adapters.sort_by_key(|a| adapter_rank(&a.get_info()));
                adapters.swap_remove(0)
            }
        };
        Self::from_adapter(adapter, opts)
    }

    /// The page's WebGPU adapter (a browser offers one to ask for).
    #[cfg(target_arch = "wasm32")]
    pub async fn new_async(opts: &GpuOptions) -> Result<Gpu> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle_from_env();
        desc.backends = wgpu::Backends::BROWSER_WEBGPU;
        let instance = wgpu::Instance::new(desc);
        let want = wgpu::RequestAdapterOptions {
            power_preference: wgpu::PowerPreference::HighPerformance,
            ..Default::default()
        };
        let adapter = instance
            .request_adapter(&want)
            .await
            .context("this browser offers no WebGPU adapter (Chromium needs --enable-unsafe-webgpu on Linux)")?;
        Self::from_adapter_async(adapter, opts).await
    }

    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_adapter(adapter: wgpu::Adapter, opts: &GpuOptions) -> Result<Gpu> {
        pollster::block_on(Self::from_adapter_async(adapter, opts))
    }

    pub async fn from_adapter_async(adapter: wgpu::Adapter, opts: &GpuOptions) -> Result<Gpu> {
        let info = adapter.get_info();
        if !adapter.get_downlevel_capabilities().flags.contains(wgpu::DownlevelFlags::COMPUTE_SHADERS) {
            bail!(
                "adapter {:?} ({:?}) has no compute shaders; pick another with --adapter or WGPU_BACKEND",
                info.name,
                info.backend
            );
        }
        let offered = adapter.features();
        let mut wanted = wgpu::Features::PIPELINE_CACHE
            | wgpu::Features::TIMESTAMP_QUERY
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
            | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
        // Tensor cores through cooperative matrices: only for the configuration the kernel uses
        // (16x16x16, f16 in, f32 accumulation), with f16 and a fixed subgroup size.
        let coop_ok = adapter.cooperative_matrix_properties().iter().any(|p| {
            (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                && p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        }) && info.subgroup_min_size == info.subgroup_max_size;
        if !opts.portable {
            wanted |= wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP;
            if info.device_type == wgpu::DeviceType::Cpu {
                wanted |= wgpu::Features::SHADER_INT64;
            }
            if coop_ok && !opts.no_coop_matrix {
                wanted |= wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX;
            }
        }
        let features = offered & wanted;
        let coop_matrix = features.contains(
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SHADER_F16 | wgpu::Features::SUBGROUP,
        );
        // Ask for what the adapter really has, not WebGPU's defaults (128 MiB bindings etc.).
        let limits = adapter.limits();
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("wginfer"),
                required_features: features,
                required_limits: limits.clone(),
                // SAFETY: the only experimental feature requested is cooperative matrices, used by
                // one kernel (lib/linear_coop) that the tests check against a CPU reference.
                experimental_features: if coop_matrix {
                    unsafe { wgpu::ExperimentalFeatures::enabled() }
                } else {
                    wgpu::ExperimentalFeatures::disabled()
                },
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            .with_context(|| format!("requesting a device from adapter {:?}", info.name))?;
        let faults = Arc::new(Faults::default());
        let f = faults.clone();
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| Faults::keep(&f.error, e.to_string())));
        let f = faults.clone();
        device.set_device_lost_callback(move |reason, msg| {
            let why = if msg.is_empty() { format!("{reason:?}") } else { format!("{reason:?}: {msg}") };
            Faults::keep(&f.lost, why);
        });
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size)
            .min(opts.max_binding_override.unwrap_or(u64::MAX));
        let caps = Caps {
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            subgroup: features.contains(wgpu::Features::SUBGROUP),
            min_subgroup_size: info.subgroup_min_size,
            max_subgroup_size: info.subgroup_max_size,
            timestamp: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            timestamp_in_pass: features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES),
            coop_matrix,
            int64: features.contains(wgpu::Features::SHADER_INT64),
            max_binding,
            max_buffer: limits.max_buffer_size,
            max_workgroup_storage: limits.max_compute_workgroup_storage_size,
            storage_offset_alignment: limits.min_storage_buffer_offset_alignment,
            cpu: info.device_type == wgpu::DeviceType::Cpu,
        };
        let driver_cache = DriverCache::open(&device, &info);
        Ok(Gpu {
            device,
            queue,
            info,
            features,
            limits,
            caps,
            pipelines: Mutex::new(PipelineCache::default()),
            driver_cache,
            buffers_created: AtomicU64::new(0),
            bytes_allocated: AtomicU64::new(0),
            memory_cap: opts.memory_cap,
            faults,
            scratch: Mutex::default(),
        })
    }

    /// Writes the driver's compiled pipelines to the cache directory for the next run (where the
    /// backend has a pipeline cache); the engine calls it once its kernels are compiled.
    pub fn save_pipeline_cache(&self) -> Result<()> {
        self.driver_cache.as_ref().map_or(Ok(()), DriverCache::save)
    }

    /// Buffers created on this device so far (tests check that decoding creates none).
    pub fn buffers_created(&self) -> u64 {
        self.buffers_created.load(Ordering::Relaxed)
    }

    /// Bytes of all buffers created so far (GPU memory the engine asked for).
    pub fn bytes_allocated(&self) -> u64 {
        self.bytes_allocated.load(Ordering::Relaxed)
    }

    /// Creates a buffer; every buffer of the engine goes through here so it is counted. Out of
    /// memory (the adapter's, or the `memory_cap`) is an error naming the buffer; the caller's
    /// buffers so far are freed as it drops them.
    pub fn buffer(&self, label: &str, size: u64, usage: wgpu::BufferUsages) -> Result<wgpu::Buffer> {
        if size > self.caps.max_buffer {
            bail!("buffer {label:?} needs {size} bytes, over this adapter's limit of {} bytes", self.caps.max_buffer);
        }
        self.check()?;
        // Sizes are rounded to 16 bytes so vec4 views and copies never fall off the end.
        let size = size.max(16).next_multiple_of(16);
        let mib = |b: u64| b as f64 / (1 << 20) as f64;
        let in_use = self.bytes_allocated();
        if let Some(cap) = self.memory_cap.filter(|&cap| in_use + size > cap) {
            bail!(
                "out of GPU memory: {label:?} needs {:.1} MiB with {:.1} MiB of the {:.1} MiB allowed (--gpu-memory) in use",
                mib(size),
                mib(in_use),
                mib(cap)
            );
        }
        let ((buffer, invalid), oom) = self.caught(wgpu::ErrorFilter::OutOfMemory, || {
            self.caught(wgpu::ErrorFilter::Validation, || {
                let desc = wgpu::BufferDescriptor { label: Some(label), size, usage, mapped_at_creation: false };
                self.device.create_buffer(&desc)
            })
        });
        if let Some(e) = oom {
            bail!("out of GPU memory: {label:?} needs {:.1} MiB with {:.1} MiB in use: {e}", mib(size), mib(in_use));
        }
        if let Some(e) = invalid {
            bail!("cannot create buffer {label:?} ({size} bytes): {e}");
        }
        self.buffers_created.fetch_add(1, Ordering::Relaxed);
        self.bytes_allocated.fetch_add(size, Ordering::Relaxed);
        Ok(buffer)
    }

    /// Runs `f` inside an error scope of `filter`, and what the scope caught. Natively wgpu
    /// answers as the call returns, so the answer is waited for. In a page the browser answers
    /// later, so no scope is pushed there: an error reaches `check` through the device's
    /// uncaptured-error handler instead.
    pub(super) fn caught<T>(&self, filter: wgpu::ErrorFilter, f: impl FnOnce() -> T) -> (T, Option<wgpu::Error>) {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let scope = self.device.push_error_scope(filter);
            let value = f();
            (value, pollster::block_on(scope.pop()))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = filter;
            (f(), None)
        }
    }

    /// Why the device was lost, if it was (`Device::destroy`, a driver reset, an error that
    /// loses it).
    pub fn lost(&self) -> Option<String> {
        self.faults.lost.lock().ok().and_then(|l| l.clone())
    }

    /// An error for a lost device, or for the first GPU error reported outside an error scope
    /// since the last check (then forgotten: the next work may succeed).
    pub fn check(&self) -> Result<()> {
        if let Some(why) = self.lost() {
            bail!("the GPU device was lost ({why}); load the model again");
        }
        if let Some(e) = self.faults.error.lock().ok().and_then(|mut e| e.take()) {
            bail!("GPU error: {e}");
        }
        Ok(())
    }

    /// A storage buffer filled with `data`.
    pub fn storage_from(&self, label: &str, data: &[u8]) -> Result<wgpu::Buffer> {
        let buf = self.buffer(label, data.len() as u64, storage_usage())?;
        self.queue.write_buffer(&buf, 0, pad4(data).as_ref());
        Ok(buf)
    }

    /// A storage buffer of at least `size` bytes, shared by every caller asking for `label`: for
    /// intermediates one dispatch writes and the next reads, so kernels that never run at the
    /// same time can hold one copy. A larger request replaces the shared buffer; earlier callers
    /// keep the smaller one they were given.
    pub fn scratch(&self, label: &'static str, size: u64) -> Result<wgpu::Buffer> {
        let mut shared = self.scratch.lock().map_err(|_| anyhow!("scratch buffers poisoned"))?;
        match shared.get(label) {
            Some(b) if b.size() >= size => Ok(b.clone()),
            _ => {
                let b = self.storage(label, size)?;
                shared.insert(label, b.clone());
                Ok(b)
            }
        }
    }

    /// An empty storage buffer (zeroed by wgpu).
    pub fn storage(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        self.buffer(label, size, storage_usage())
    }

    /// Copies `size` bytes of `src` back to the CPU. For tests and one-off reads: the decode
    /// loop uses its own preallocated staging buffer instead.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn read_back(&self, src: &wgpu::Buffer, size: u64) -> Result<Vec<u8>> {
        let size = size.next_multiple_of(4);
        let staging = self.buffer("read_back", size, wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST)?;
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &staging, 0, size);
        self.queue.submit([enc.finish()]);
        self.map_read(&staging, size)
    }

    /// Waits for `buf` (MAP_READ) and returns its first `size` bytes.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn map_read(&self, buf: &wgpu::Buffer, size: u64) -> Result<Vec<u8>> {
        pollster::block_on(self.map_read_after(buf, size, None))
    }

    /// The first `size` bytes of `buf` (MAP_READ) once `submission` (the last one that writes
    /// `buf`; `None`: everything submitted) has run, not waiting for later work queued behind
    /// it. A future, because a page's browser maps the buffer when the page's event loop turns;
    /// natively the device is polled until the submission has run, so it is ready at once.
    pub async fn map_read_after(
        &self,
        buf: &wgpu::Buffer,
        size: u64,
        submission: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>> {
        let slice = buf.slice(0..size);
        let (tx, mut rx) = futures_channel::oneshot::channel();
        slice.map_async(wgpu::MapMode::Read, move |r| {
            let _ = tx.send(r);
        });
        if let Err(e) = self.wait_for(submission).await {
            // The step failed, but the buffer may be mapped already: unmapped, or every later
            // copy into it would fail validation.
            if let Ok(Some(Ok(()))) = rx.try_recv() {
                buf.unmap();
            }
            return Err(e);
        }
        rx.await
            .map_err(|_| anyhow!("buffer map callback never ran"))?
            .map_err(|e| anyhow!("mapping a read-back buffer failed: {e}"))?;
        let bytes = slice.get_mapped_range().map_err(|e| anyhow!("{e:?}"))?.to_vec();
        buf.unmap();
        Ok(bytes)
    }

    /// `wait` as a future: natively `wait` itself; in a page, until the queue reports its work
    /// done (the browser's answer comes as the page's event loop turns), then `check`.
    pub async fn wait_for(&self, submission: Option<wgpu::SubmissionIndex>) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            self.wait(submission)
        }
        #[cfg(target_arch = "wasm32")]
        {
            let _ = submission;
            let (tx, rx) = futures_channel::oneshot::channel();
            self.queue.on_submitted_work_done(move || {
                let _ = tx.send(());
            });
            rx.await.map_err(|_| anyhow!("the queue's work-done callback never ran"))?;
            self.check()
        }
    }

    /// Waits until `submission` (or everything submitted, with `None`) has run; then any GPU
    /// fault reported meanwhile is the error (`check`).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn wait(&self, submission: Option<wgpu::SubmissionIndex>) -> Result<()> {
        let wait = wgpu::PollType::Wait { submission_index: submission, timeout: None };
        if let Err(e) = self.device.poll(wait) {
            // A destroyed device's submissions never run: its lost callback comes with the next
            // poll, which names the cause better than the wait's own error.
            let _ = self.device.poll(wgpu::PollType::Poll);
            self.check()?;
            bail!("GPU wait failed: {e}");
        }
        self.check()
    }

    /// Records one compute pass with `f`, submits it and waits for the GPU.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn run_pass(&self, f: impl FnOnce(&mut wgpu::ComputePass<'_>)) -> Result<()> {
        let mut enc = self.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            f(&mut pass);
        }
        self.queue.submit([enc.finish()]);
        self.wait(None)
    }

    /// The adapter's name; browsers keep it to themselves, so there the backend's.
    pub fn adapter_name(&self) -> String {
        match self.info.name.as_str() {
            "" => format!("{:?}", self.info.backend),
            name => name.to_string(),
        }
    }

    /// One line per fact, as `wginfer info` prints it.
    pub fn describe(&self) -> String {
        let i = &self.info;
        let c = &self.caps;
        let l = &self.limits;
        format!(
            "adapter: {}\nbackend: {:?}\ndevice type: {:?}\ndriver: {} {}\n\
             features: shader_f16={} subgroup={} (size {}..{}) timestamp={} timestamp_in_pass={} cooperative_matrix={}\n\
             limits: max_storage_binding={} max_buffer={} workgroup_storage={} invocations={} storage_offset_alignment={}",
            i.name,
            i.backend,
            i.device_type,
            i.driver,
            i.driver_info,
            c.shader_f16,
            c.subgroup,
            i.subgroup_min_size,
            i.subgroup_max_size,
            c.timestamp,
            c.timestamp_in_pass,
            c.coop_matrix,
            l.max_storage_buffer_binding_size,
            l.max_buffer_size,
            l.max_compute_workgroup_storage_size,
            l.max_compute_invocations_per_workgroup,
            l.min_storage_buffer_offset_alignment,
        )
    }
}

pub fn storage_usage() -> wgpu::BufferUsages {
    wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC
}

/// wgpu writes whole 4-byte words; pad odd-sized uploads.
fn pad4(data: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if data.len().is_multiple_of(4) {
        data.into()
    } else {
        let mut v = data.to_vec();
        v.resize(data.len().next_multiple_of(4), 0);
        v.into()
    }
}
