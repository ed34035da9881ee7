//! The driver's pipeline cache (Vulkan's VkPipelineCache, through wgpu), kept on disk between
//! runs: a driver without a disk cache of its own then does not recompile every kernel at each
//! load. Backends without one (GL, the browser) and hosts without a cache directory go without.

use std::path::PathBuf;

use anyhow::{Context, Result};

/// `$XDG_CACHE_HOME/wginfer`, else `$HOME/.cache/wginfer`: the tune cache and the driver's
/// pipeline cache live there.
pub fn cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wginfer"))
}

pub(super) struct DriverCache {
    pub(super) cache: wgpu::PipelineCache,
    path: PathBuf,
    /// Bytes the file held when opened (0: none); `save` skips writing what has not grown.
    loaded: usize,
}

impl DriverCache {
    /// The cache for this adapter, primed from its file when there is one. `None` where the
    /// device lacks PIPELINE_CACHE or there is no cache directory.
    pub(super) fn open(device: &wgpu::Device, info: &wgpu::AdapterInfo) -> Option<DriverCache> {
        if !device.features().contains(wgpu::Features::PIPELINE_CACHE) {
            return None;
        }
        let path = cache_dir()?.join(wgpu::util::pipeline_cache_key(info)?);
        let data = std::fs::read(&path).ok();
        // SAFETY: the data is what `save` wrote for an adapter with this key; wgpu checks its
        // header (adapter, driver version, length, hash) and `fallback` starts an empty cache
        // when the check fails, so a stale or damaged file costs only the compile time.
        let cache = unsafe {
            device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                label: Some("wginfer pipelines"),
                data: data.as_deref(),
                fallback: true,
            })
        };
        Some(DriverCache { cache, path, loaded: data.map_or(0, |d| d.len()) })
    }

    /// Writes the cache to its file when the driver's data outgrew what was read (written to a
    /// temporary file and renamed, so a concurrent reader sees the old file or the new one).
    pub(super) fn save(&self) -> Result<()> {
        let Some(data) = self.cache.get_data() else { return Ok(()) };
        if data.len() <= self.loaded {
            return Ok(());
        }
        let dir = self.path.parent().context("pipeline cache path has no directory")?;
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = self.path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, &data).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &self.path).with_context(|| format!("writing {}", self.path.display()))
    }
}
