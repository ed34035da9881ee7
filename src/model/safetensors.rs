//! safetensors files of a model folder (memory-mapped, or in memory): a single file or shards listed in
//! model.safetensors.index.json. The `safetensors` crate reads and checks the header against the
//! file before any tensor is read, so a truncated or inconsistent file is an error that names
//! it (and the tensor at fault), never a panic or an allocation larger than the file.

use super::folder::ModelFolder;
use super::mapped::FileBytes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context, Result};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::SafeTensorError;
use serde_json::Value;

use super::tensor::{DType, HostTensor, TensorSource};

struct Entry {
    file: usize,
    dtype: DType,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

pub struct SafeTensors {
    files: Vec<(PathBuf, Arc<FileBytes>)>,
    entries: HashMap<String, Entry>,
}

impl SafeTensors {
    /// Opens the folder's `model.safetensors`, or the shards its `model.safetensors.index.json`
    /// names.
    pub fn open(folder: &ModelFolder) -> Result<SafeTensors> {
        const INDEX: &str = "model.safetensors.index.json";
        let names: Vec<String> = match folder.read_json(INDEX)? {
            Some(v) => {
                let index = folder.file_path(INDEX);
                let map = v
                    .get("weight_map")
                    .and_then(Value::as_object)
                    .with_context(|| format!("{}: missing \"weight_map\"", index.display()))?;
                let mut shards = Vec::new();
                for name in map.values().filter_map(Value::as_str) {
                    // A shard is a file of the folder: a name with a path in it could reach any file.
                    let plain = Path::new(name).file_name().is_some_and(|f| f == name);
                    anyhow::ensure!(
                        plain,
                        "{}: shard {name:?} is not a file name in the model folder",
                        index.display()
                    );
                    shards.push(name.to_string());
                }
                shards.sort();
                shards.dedup();
                shards
            }
            None => vec!["model.safetensors".to_string()],
        };
        let mut st = SafeTensors { files: Vec::new(), entries: HashMap::new() };
        for name in names {
            st.add_map(&folder.file_path(&name), folder.require(&name)?)?;
        }
        Ok(st)
    }

    /// `bytes` read as the single safetensors file `path` would be (fuzz targets, tests).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<SafeTensors> {
        let mut st = SafeTensors { files: Vec::new(), entries: HashMap::new() };
        st.add_map(path, Arc::new(FileBytes::copy(bytes)))?;
        Ok(st)
    }

    fn add_map(&mut self, path: &Path, map: Arc<FileBytes>) -> Result<()> {
        let idx = self.files.len();
        for (name, e) in
            read_header(&map).with_context(|| format!("{} is not a valid safetensors file", path.display()))?
        {
            self.entries.insert(name, Entry { file: idx, ..e });
        }
        self.files.push((path.to_path_buf(), map));
        Ok(())
    }
}

/// The tensors of a safetensors file as the `safetensors` crate reads and validates its header
/// (every offset inside the file, data covering it exactly, shapes matching sizes), with the
/// dtypes the engine supports.
fn read_header(bytes: &[u8]) -> Result<Vec<(String, Entry)>> {
    let (n, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| explain(e, bytes))?;
    let data_start = 8 + n;
    meta.tensors()
        .into_iter()
        .map(|(name, info)| {
            let dtype = DType::from_safetensors(&info.dtype.to_string())
                .with_context(|| format!("tensor {name}: unsupported dtype {} (F32, F16, BF16 are)", info.dtype))?;
            let (b, e) = info.data_offsets;
            Ok((name, Entry { file: 0, dtype, shape: info.shape.clone(), range: data_start + b..data_start + e }))
        })
        .collect()
}

/// The crate's error in terms of the file. Most of its errors do not say which tensor is wrong,
/// so the header is searched for the entry at fault.
fn explain(err: SafeTensorError, bytes: &[u8]) -> anyhow::Error {
    let len = bytes.len();
    let n = bytes.first_chunk::<8>().map_or(0, |b| u64::from_le_bytes(*b));
    // Empty unless the header lies inside the file.
    let header = usize::try_from(n).ok().and_then(|n| bytes.get(8..)?.get(..n)).unwrap_or_default();
    let data_len = len.saturating_sub(8 + header.len());
    match err {
        SafeTensorError::HeaderTooSmall => anyhow!("file is {len} bytes, shorter than the 8-byte header length"),
        SafeTensorError::HeaderTooLarge => anyhow!("header length {n} is over the format's limit of 100 MB"),
        SafeTensorError::InvalidHeaderLength => {
            anyhow!("header length {n} runs past the end of the file ({len} bytes): truncated?")
        }
        SafeTensorError::MetadataIncompleteBuffer => match serde_json::from_slice::<Metadata>(header) {
            Ok(meta) if meta.data_len() > data_len => anyhow!(
                "tensor {}: data ends at byte {} but the file holds {data_len} data bytes: truncated?",
                meta.offset_keys().last().map_or("", String::as_str),
                meta.data_len()
            ),
            _ => anyhow!("{data_len} data bytes follow the header but its tensors do not cover them exactly"),
        },
        other => anyhow!(entry_at_fault(header).unwrap_or_else(|| other.to_string())),
    }
}

/// The first tensor entry of a (JSON) header that is invalid on its own, and why.
fn entry_at_fault(header: &[u8]) -> Option<String> {
    let entries: serde_json::Map<String, Value> = serde_json::from_slice(header).ok()?;
    entries.into_iter().filter(|(name, _)| name != "__metadata__").find_map(|(name, v)| {
        let why = match serde_json::from_value::<TensorInfo>(v) {
            Err(e) => e.to_string(),
            Ok(info) => {
                let (b, e) = info.data_offsets;
                let desc = format!("dtype {}, shape {:?}, data_offsets [{b}, {e}]", info.dtype, info.shape);
                // Checked as the only tensor of a file, its data starting at 0.
                let alone = TensorInfo { data_offsets: (0, e.checked_sub(b)?), ..info };
                let err = Metadata::new(None, vec![(name.clone(), alone)]).err()?;
                format!("{err} ({desc})")
            }
        };
        Some(format!("tensor {name}: {why}"))
    })
}

impl TensorSource for SafeTensors {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>> {
        Ok(self.entries.get(name).map(|e| self.host(name, e)))
    }

    fn every_tensor(&self) -> Vec<HostTensor<'_>> {
        let mut names: Vec<&String> = self.entries.keys().collect();
        names.sort();
        names.into_iter().map(|n| self.host(n, &self.entries[n])).collect()
    }
}

impl SafeTensors {
    fn host(&self, name: &str, e: &Entry) -> HostTensor<'_> {
        HostTensor {
            name: name.to_string(),
            dtype: e.dtype,
            shape: e.shape.clone(),
            bytes: &self.files[e.file].1[e.range.clone()],
            origin: self.files[e.file].0.display().to_string(),
        }
    }
}
