//! safetensors files, memory-mapped: a single file or shards listed in
//! model.safetensors.index.json. The header is checked against the file before any tensor is
//! read, so a truncated or inconsistent file is an error that names it, never a panic.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use memmap2::Mmap;
use serde_json::Value;

use super::tensor::{DType, HostTensor, TensorSource};

struct Entry {
    file: usize,
    dtype: DType,
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

pub struct SafeTensors {
    files: Vec<(PathBuf, Mmap)>,
    entries: HashMap<String, Entry>,
}

impl SafeTensors {
    /// Opens `dir/model.safetensors`, or the shards named by `dir/model.safetensors.index.json`.
    pub fn open_dir(dir: &Path) -> Result<SafeTensors> {
        let index = dir.join("model.safetensors.index.json");
        let paths: Vec<PathBuf> = if index.exists() {
            let text = std::fs::read_to_string(&index).with_context(|| format!("cannot read {}", index.display()))?;
            let v: Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", index.display()))?;
            let map = v
                .get("weight_map")
                .and_then(Value::as_object)
                .with_context(|| format!("{}: missing \"weight_map\"", index.display()))?;
            let mut shards: Vec<PathBuf> = map.values().filter_map(Value::as_str).map(|s| dir.join(s)).collect();
            shards.sort();
            shards.dedup();
            shards
        } else {
            vec![dir.join("model.safetensors")]
        };
        let mut st = SafeTensors { files: Vec::new(), entries: HashMap::new() };
        for p in paths {
            st.add_file(&p)?;
        }
        Ok(st)
    }

    fn add_file(&mut self, path: &Path) -> Result<()> {
        let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: the map is read-only; the file is not expected to change while loaded.
        let map = unsafe { Mmap::map(&file) }.with_context(|| format!("cannot map {}", path.display()))?;
        let idx = self.files.len();
        for (name, e) in
            parse_header(&map).with_context(|| format!("{} is not a valid safetensors file", path.display()))?
        {
            self.entries.insert(name, Entry { file: idx, ..e });
        }
        self.files.push((path.to_path_buf(), map));
        Ok(())
    }
}

fn parse_header(bytes: &[u8]) -> Result<Vec<(String, Entry)>> {
    if bytes.len() < 8 {
        bail!("file is {} bytes, shorter than the 8-byte header length", bytes.len());
    }
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap());
    if n > (bytes.len() - 8) as u64 {
        bail!("header length {n} runs past the end of the file ({} bytes): truncated?", bytes.len());
    }
    let data_start = 8 + n as usize;
    let header: Value = serde_json::from_slice(&bytes[8..data_start]).context("header is not valid JSON")?;
    let obj = header.as_object().context("header is not a JSON object")?;
    let data_len = bytes.len() - data_start;
    let mut out = Vec::new();
    for (name, info) in obj {
        if name == "__metadata__" {
            continue;
        }
        let dtype_s =
            info.get("dtype").and_then(Value::as_str).with_context(|| format!("tensor {name}: missing dtype"))?;
        let dtype = DType::from_safetensors(dtype_s)
            .with_context(|| format!("tensor {name}: unsupported dtype {dtype_s} (F32, F16, BF16 are)"))?;
        let shape: Vec<usize> = info
            .get("shape")
            .and_then(Value::as_array)
            .with_context(|| format!("tensor {name}: missing shape"))?
            .iter()
            .map(|d| d.as_u64().map(|d| d as usize))
            .collect::<Option<_>>()
            .with_context(|| format!("tensor {name}: shape is not a list of integers"))?;
        let offs = info
            .get("data_offsets")
            .and_then(Value::as_array)
            .with_context(|| format!("tensor {name}: missing data_offsets"))?;
        let (b, e) = match offs.as_slice() {
            [b, e] => (b.as_u64().unwrap_or(u64::MAX) as usize, e.as_u64().unwrap_or(u64::MAX) as usize),
            _ => bail!("tensor {name}: data_offsets must hold two numbers"),
        };
        let elems = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .with_context(|| format!("tensor {name}: shape {shape:?} overflows"))?;
        let want = dtype.bytes_for(elems).with_context(|| format!("tensor {name}: too large"))?;
        if b > e || e - b != want {
            bail!("tensor {name}: data_offsets [{b}, {e}] do not match shape {shape:?} of {dtype:?} ({want} bytes)");
        }
        if e > data_len {
            bail!("tensor {name}: data ends at byte {e} but the file holds {data_len} data bytes: truncated?");
        }
        out.push((name.clone(), Entry { file: 0, dtype, shape, range: data_start + b..data_start + e }));
    }
    Ok(out)
}

impl TensorSource for SafeTensors {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>> {
        Ok(self.entries.get(name).map(|e| HostTensor {
            name: name.to_string(),
            dtype: e.dtype,
            shape: e.shape.clone(),
            bytes: &self.files[e.file].1[e.range.clone()],
            origin: self.files[e.file].0.display().to_string(),
        }))
    }
}
