//! The driver's pipeline cache (Vulkan's VkPipelineCache, through wgpu), kept on disk between
//! runs: a driver without a disk cache of its own then does not recompile every kernel at each
//! load. Backends without one (GL, the browser) and hosts without a cache directory go without.
//! The file is the cache's data after its FNV-1a digest (8 bytes, little-endian): a file whose
//! digest does not match is not handed to the driver.

use std::path::PathBuf;

use anyhow::Result;

use super::cache_files::{cache_dir, fnv1a64, write_replacing};

pub(super) struct DriverCache {
    pub(super) cache: wgpu::PipelineCache,
    path: PathBuf,
    /// The data the file held when opened (empty: none, or not valid); `save` writes only
    /// other data.
    loaded: Vec<u8>,
}

impl DriverCache {
    /// The cache for this adapter, primed from its file when there is a valid one. `None` where
    /// the device lacks PIPELINE_CACHE or there is no cache directory.
    pub(super) fn open(device: &wgpu::Device, info: &wgpu::AdapterInfo) -> Option<DriverCache> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let path = cache_dir()?.join(wgpu::util::pipeline_cache_key(info)?);
        let loaded = std::fs::read(&path).ok().and_then(|file| checked(&file).map(<[u8]>::to_vec)).unwrap_or_default();
        // SAFETY: the data is what `save` wrote for an adapter with this key, its digest
        // checked; wgpu checks its header (adapter, driver version, length) and `fallback`
        // starts an empty cache when that check fails, so a stale file costs only compile time.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("wginfer pipelines"),
                data: (!loaded.is_empty()).then_some(&loaded[..]),
                fallback: true,
            })
        };
        Some(DriverCache { cache, path, loaded })
    }

    /// Writes the cache to its file when the driver's data differs from what was read (after a
    /// driver update wgpu starts an empty cache, whose data replaces the stale file).
    pub(super) fn save(&self) -> Result<()> {
        match self.cache.get_data() {
            Some(data) if data != self.loaded => {
                let file: Vec<u8> = fnv1a64(data.iter().copied()).to_le_bytes().into_iter().chain(data).collect();
                write_replacing(&self.path, &file)
            }
            _ => Ok(()),
        }
    }
}

/// The data of a cache file whose digest matches it.
fn checked(file: &[u8]) -> Option<&[u8]> {
    let (digest, data) = file.split_first_chunk::<8>()?;
    (u64::from_le_bytes(*digest) == fnv1a64(data.iter().copied())).then_some(data)
}
