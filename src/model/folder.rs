//! A Hugging Face model folder (config.json, *.safetensors, tokenizer files), its files read by
//! name: from a directory (mapped), or handed over in memory (the browser's File API or
//! `fetch`, where there is no file system).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::Value;

use super::mapped::FileBytes;

pub enum ModelFolder {
    Dir(PathBuf),
    /// `name` stands for the folder's path in messages.
    Memory {
        name: PathBuf,
        files: HashMap<String, Arc<FileBytes>>,
    },
}

impl ModelFolder {
    pub fn dir(path: &Path) -> ModelFolder {
        ModelFolder::Dir(path.to_path_buf())
    }

    /// Files given as (file name, bytes); each is copied once, into 8-byte aligned memory.
    pub fn in_memory(name: &str, files: impl IntoIterator<Item = (String, Vec<u8>)>) -> ModelFolder {
        let files = files.into_iter().map(|(n, b)| (n, Arc::new(FileBytes::copy(&b)))).collect();
        ModelFolder::Memory { name: PathBuf::from(name), files }
    }

    /// The folder's path, or the name it stands under.
    pub fn path(&self) -> &Path {
        match self {
            ModelFolder::Dir(p) => p,
            ModelFolder::Memory { name, .. } => name,
        }
    }

    /// Where `file` is, for messages.
    pub fn file_path(&self, file: &str) -> PathBuf {
        self.path().join(file)
    }

    pub fn has(&self, file: &str) -> bool {
        match self {
            ModelFolder::Dir(p) => p.join(file).exists(),
            ModelFolder::Memory { files, .. } => files.contains_key(file),
        }
    }

    /// `file`'s bytes, `None` where the folder has no such file.
    pub fn read(&self, file: &str) -> Result<Option<Arc<FileBytes>>> {
        match self {
            ModelFolder::Dir(p) if !p.join(file).exists() => Ok(None),
            ModelFolder::Dir(p) => Ok(Some(Arc::new(FileBytes::open(&p.join(file))?))),
            ModelFolder::Memory { files, .. } => Ok(files.get(file).cloned()),
        }
    }

    /// `file`'s bytes; its absence is an error naming it.
    pub fn require(&self, file: &str) -> Result<Arc<FileBytes>> {
        self.read(file)?.with_context(|| format!("cannot read {}: no such file", self.file_path(file).display()))
    }

    /// `file` parsed as JSON, `None` where absent; a syntax error names the file.
    pub fn read_json(&self, file: &str) -> Result<Option<Value>> {
        let Some(bytes) = self.read(file)? else { return Ok(None) };
        let v = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not valid JSON", self.file_path(file).display()))?;
        Ok(Some(v))
    }
}
