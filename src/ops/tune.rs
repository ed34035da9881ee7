//! The GEMV autotune cache: the fastest GEMV shape per (weight shape, type), found by
//! `wginfer tune` on one adapter, driver and wgpu version with this build's kernels, and used by
//! every later load there. One JSON file holds entries for any number of adapters; an entry for
//! another adapter, driver, wgpu version or kernel set (`shader::sources_digest`: a change of
//! the shaders, or of KERNELS_EPOCH beside it, makes the old timings stale) is ignored, so a
//! stale cache never picks shapes for the wrong stack.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::linear::GemvShape;
use super::WeightType;
use crate::gpu::cache_files::{cache_dir, write_replacing};
use crate::gpu::shader::sources_digest;

/// The wgpu this binary is built with (tests check it against Cargo.lock).
pub const WGPU_VERSION: &str = "30.0.2";

/// Tuned GEMV shapes, keyed by `gemv_key`.
pub type GemvTable = BTreeMap<String, GemvShape>;

/// A table that lives as long as the process (kernel configurations refer to it); each distinct
/// table is kept once, however many models are loaded.
pub fn intern(table: GemvTable) -> &'static GemvTable {
    static TABLES: std::sync::Mutex<Vec<&'static GemvTable>> = std::sync::Mutex::new(Vec::new());
    let mut tables = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(t) = tables.iter().find(|t| ***t == table) {
        return t;
    }
    let t: &'static GemvTable = Box::leak(Box::new(table));
    tables.push(t);
    t
}

/// The table key of a `[n, k]` weight of type `ty`.
pub fn gemv_key(n: u32, k: u32, ty: WeightType) -> String {
    format!("{n}x{k} {}", ty.name())
}

#[derive(Serialize, Deserialize, Default)]
struct CacheFile {
    entries: Vec<Entry>,
}

#[derive(Serialize, Deserialize)]
struct Entry {
    adapter: String,
    driver: String,
    wgpu: String,
    /// `shader::sources_digest()` of the build that measured it (absent in older files).
    #[serde(default)]
    kernels: String,
    gemv: GemvTable,
}

impl Entry {
    fn is_for(&self, adapter: &str, driver: &str) -> bool {
        self.adapter == adapter
            && self.driver == driver
            && self.wgpu == WGPU_VERSION
            && self.kernels == sources_digest()
    }
}

/// What a cache entry is valid for: the adapter, and its backend and driver.
fn stack(info: &wgpu::AdapterInfo) -> (String, String) {
    (info.name.clone(), format!("{:?} {} {}", info.backend, info.driver, info.driver_info).trim().to_string())
}

/// `$WGINFER_TUNE_CACHE`, else `tune.json` in [`cache_dir`].
/// An empty `$WGINFER_TUNE_CACHE` counts as unset.
pub fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("WGINFER_TUNE_CACHE").filter(|p| !p.is_empty()) {
        return Some(p.into());
    }
    Some(cache_dir()?.join("tune.json"))
}

fn read(path: &Path) -> Result<CacheFile> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading tune cache {}", path.display()))?;
    // Deleting is the remedy for a damaged file, not for a device such as /dev/null.
    let remedy = if path.is_file() { " (delete it to start a new one)" } else { "" };
    serde_json::from_str(&text)
        .with_context(|| format!("tune cache {} is not a valid cache file{remedy}", path.display()))
}

/// Whether `store` will be able to update the cache at `path`, checked before a tune spends
/// minutes timing: a file there must parse, and its folder must take a new file.
pub fn check_store(path: &Path) -> Result<()> {
    if path.is_dir() || path.as_os_str().to_string_lossy().ends_with(std::path::MAIN_SEPARATOR) {
        anyhow::bail!("the tune cache {} is a folder; name a file", path.display());
    }
    if path.exists() {
        read(path)?;
    }
    // The folder the write lands in: a link's target's.
    let path = &crate::gpu::cache_files::link_target(path)?;
    let mut probe = path.as_os_str().to_owned();
    probe.push(".probe");
    let probe = std::path::PathBuf::from(probe);
    write_replacing(&probe, b"").with_context(|| format!("the tune cache {} cannot be written", path.display()))?;
    std::fs::remove_file(&probe).with_context(|| format!("removing {}", probe.display()))
}

/// This adapter's table from the cache at `path`; `None` if the file or the entry is absent.
pub fn load(path: &Path, info: &wgpu::AdapterInfo) -> Result<Option<GemvTable>> {
    if !path.exists() {
        return Ok(None);
    }
    let (adapter, driver) = stack(info);
    let file = read(path)?;
    let Some(entry) = file.entries.into_iter().find(|e| e.is_for(&adapter, &driver)) else {
        return Ok(None);
    };
    for (key, shape) in &entry.gemv {
        shape.check().with_context(|| format!("tune cache {}: entry {key:?}", path.display()))?;
    }
    Ok(Some(entry.gemv))
}

/// Merges `table` into this adapter's entry of the cache at `path` (created if absent; entries
/// of other adapters and drivers are kept).
pub fn store(path: &Path, info: &wgpu::AdapterInfo, table: &GemvTable) -> Result<()> {
    let mut file = if path.exists() { read(path)? } else { CacheFile::default() };
    let (adapter, driver) = stack(info);
    // This stack's entries from other kernels or wgpu versions are stale: dropped.
    file.entries.retain(|e| e.adapter != adapter || e.driver != driver || e.is_for(&adapter, &driver));
    match file.entries.iter_mut().find(|e| e.is_for(&adapter, &driver)) {
        Some(e) => e.gemv.extend(table.iter().map(|(k, v)| (k.clone(), *v))),
        None => file.entries.push(Entry {
            adapter,
            driver,
            wgpu: WGPU_VERSION.to_string(),
            kernels: sources_digest().to_string(),
            gemv: table.clone(),
        }),
    }
    // Through a file renamed over it: an interrupted tune never leaves a half-written cache.
    write_replacing(path, serde_json::to_string_pretty(&file)?.as_bytes())
        .with_context(|| format!("writing tune cache {}", path.display()))
}
