//! A model file's bytes, read through one type so the file readers (GGUF, safetensors) parse
//! them with the same code whatever holds them: a read-only map of the file (native targets),
//! or bytes in memory (what a caller hands over: the browser's File API or `fetch`, fuzz
//! targets, tests).

use anyhow::{Context, Result};
use std::ops::Deref;
use std::path::Path;

pub enum FileBytes {
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(memmap2::Mmap),
    /// In 8-byte words, so that tensor data aligned in the file is aligned in memory, as in a
    /// (page-aligned) map: readers view f32 and f16 tensors in place.
    Owned { words: Vec<u64>, len: usize },
}

impl FileBytes {
    /// The file at `path`: mapped where the target can map files, else read.
    pub fn open(path: &Path) -> Result<FileBytes> {
        #[cfg(not(target_arch = "wasm32"))]
        {
            let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
            // SAFETY: a read-only map of a file not expected to change while it is loaded.
            let map = unsafe { memmap2::Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
            Ok(FileBytes::Mapped(map))
        }
        #[cfg(target_arch = "wasm32")]
        {
            let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
            Ok(FileBytes::copy(&bytes))
        }
    }

    /// A copy of `bytes`.
    pub fn copy(bytes: &[u8]) -> FileBytes {
        let mut words = vec![0u64; bytes.len().div_ceil(8)];
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        FileBytes::Owned { words, len: bytes.len() }
    }
}

impl Deref for FileBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            #[cfg(not(target_arch = "wasm32"))]
            FileBytes::Mapped(map) => map,
            FileBytes::Owned { words, len } => &bytemuck::cast_slice(words)[..*len],
        }
    }
}
