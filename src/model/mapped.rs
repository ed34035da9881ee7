//! Bytes from memory as a read-only map, so that the file readers (GGUF, safetensors) parse a
//! buffer through the same code as a mapped file (fuzz targets and tests need no file).

use anyhow::{Context, Result};
use memmap2::{Mmap, MmapMut};

/// A read-only anonymous map holding a copy of `bytes`.
pub fn copy_to_map(bytes: &[u8]) -> Result<Mmap> {
    let mut map = MmapMut::map_anon(bytes.len()).context("cannot map memory for the file's bytes")?;
    map.copy_from_slice(bytes);
    map.make_read_only().context("cannot make the map of the file's bytes read-only")
}
