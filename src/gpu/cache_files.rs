//! Files the engine keeps between runs (the tune cache, the driver's pipeline cache): where they
//! live, how they are written, and the digest that recognises what they were made from (64-bit
//! FNV-1a: the same on every build and platform, unlike std's hasher).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use anyhow::{Context, Result};

pub fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> u64 {
    bytes.into_iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `$XDG_CACHE_HOME/wginfer`, else `$HOME/.cache/wginfer`: the tune cache and the driver's
/// pipeline cache live there. As the XDG spec asks, an empty or relative value is ignored (it
/// would put the caches in whatever folder the program runs in).
pub fn cache_dir() -> Option<PathBuf> {
    let absolute = |var: &str| std::env::var_os(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let base = absolute("XDG_CACHE_HOME").or_else(|| absolute("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("wginfer"))
}

/// Writes `bytes` to `path` through a temporary file beside it, renamed over it: a reader sees
/// the old file or the new one, and writers in other threads or processes never share a
/// temporary file.
/// A symbolic link is written through: its target is replaced, the link stays.
pub fn write_replacing(path: &Path, bytes: &[u8]) -> Result<()> {
    static WRITES: AtomicU32 = AtomicU32::new(0);
    let target = link_target(path)?;
    let path = target.as_path();
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}-{n}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()));
    let renamed =
        written.and_then(|()| std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display())));
    if renamed.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    renamed
}

/// The file a write to `path` replaces: `path`, or where its symbolic links lead (a target
/// that does not exist yet included; a relative one is relative to its link's folder).
pub fn link_target(path: &Path) -> Result<PathBuf> {
    let mut p = path.to_path_buf();
    // A chain of links, not a loop.
    for _ in 0..32 {
        if !p.is_symlink() {
            return Ok(p);
        }
        let to = std::fs::read_link(&p).with_context(|| format!("following the link {}", p.display()))?;
        p = p.parent().map_or(to.clone(), |dir| dir.join(&to));
    }
    anyhow::bail!("{}: too many levels of links", path.display())
}
