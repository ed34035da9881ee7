//! GGUF files (versions 2 and 3): header, metadata, tensor infos, memory-mapped data, and the
//! mapping of `llama` / `qwen2` / `qwen3` / `gemma3` metadata and tensor names to the engine's. Every count,
//! length and offset is checked against the file before it is used, so a malformed file is an
//! error naming it, never a panic or a huge allocation: what the header allocates is charged to
//! a budget the size of the file.

use super::mapped::FileBytes;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::config::{positive, valid_size, Activation, Arch, BlockOptions, ModelConfig, RopeScaling, MAX_SIZE};
use super::tensor::{DType, HostTensor, TensorSource};

/// A metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Meta {
    Int(i64),
    UInt(u64),
    Float(f64),
    Bool(bool),
    Str(String),
    Array(Vec<Meta>),
}

impl Meta {
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Meta::UInt(v) => Some(v),
            Meta::Int(v) if v >= 0 => Some(v as u64),
            _ => None,
        }
    }
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Meta::Float(v) => Some(v),
            Meta::UInt(v) => Some(v as f64),
            Meta::Int(v) => Some(v as f64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Meta::Str(s) => Some(s),
            _ => None,
        }
    }
    pub fn as_array(&self) -> Option<&[Meta]> {
        match self {
            Meta::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The value for an error message, cut short: an array of a million tokens is not printed.
    pub fn describe(&self) -> String {
        match self {
            Meta::Int(v) => format!("the integer {v}"),
            Meta::UInt(v) => format!("the integer {v}"),
            Meta::Float(v) => format!("the number {v}"),
            Meta::Bool(v) => format!("the boolean {v}"),
            Meta::Str(s) if s.chars().count() > 40 => {
                format!("a string of {} bytes ({:?}...)", s.len(), s.chars().take(40).collect::<String>())
            }
            Meta::Str(s) => format!("the string {s:?}"),
            Meta::Array(a) => format!("an array of {} values", a.len()),
        }
    }
}

struct TensorInfo {
    dtype: DType,
    /// Row-major shape (GGUF's `ne` reversed): [rows, cols] for a matrix.
    shape: Vec<usize>,
    range: std::ops::Range<usize>,
}

pub struct Gguf {
    pub path: PathBuf,
    pub version: u32,
    pub meta: HashMap<String, Meta>,
    tensors: HashMap<String, TensorInfo>,
    map: FileBytes,
}

/// What parsing a header may allocate beyond the size of its file: files that hold a tokenizer
/// and little else take about three times their size in memory (a `Meta` per short string).
const ALLOC_SLACK: usize = 64 << 20;

/// A tensor info as read, before it is checked against the file.
type RawInfo = (String, Vec<u64>, u32, u64);

/// Reads little-endian values with bounds checks.
struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
    /// Bytes the parse may still allocate.
    budget: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.b.len() - self.pos {
            bail!("truncated: {what} needs {n} bytes at offset {} but the file has {}", self.pos, self.b.len());
        }
        let s = &self.b[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        Ok(self.take(N, what)?.try_into()?)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }
    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }
    /// Takes `n` items of `T` from the budget before they are allocated.
    fn charge<T>(&mut self, n: usize, what: &str) -> Result<()> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>().max(1));
        if bytes > self.budget {
            bail!("{what} is {n}: {bytes} bytes in memory, more than a file of {} bytes can need", self.b.len());
        }
        self.budget -= bytes;
        Ok(())
    }
    /// A count of items that each take at least `min_bytes`: more than the file could hold is
    /// an error, not an allocation.
    fn count(&mut self, min_bytes: usize, what: &str) -> Result<usize> {
        let n = self.u64(what)?;
        let room = ((self.b.len() - self.pos) / min_bytes.max(1)) as u64;
        if n > room {
            bail!(
                "{what} is {n}, more than the {} bytes left in the file could hold: truncated or corrupt",
                self.b.len() - self.pos
            );
        }
        Ok(n as usize)
    }
    fn string(&mut self, what: &str) -> Result<String> {
        let what_len = format!("length of {what}");
        let n = self.count(1, &what_len)?;
        self.charge::<u8>(n, &what_len)?;
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
    fn value(&mut self, ty: u32, what: &str, depth: u32) -> Result<Meta> {
        Ok(match ty {
            0 => Meta::UInt(u8::from_le_bytes(self.bytes(what)?) as u64),
            1 => Meta::Int(i8::from_le_bytes(self.bytes(what)?) as i64),
            2 => Meta::UInt(u16::from_le_bytes(self.bytes(what)?) as u64),
            3 => Meta::Int(i16::from_le_bytes(self.bytes(what)?) as i64),
            4 => Meta::UInt(self.u32(what)? as u64),
            5 => Meta::Int(self.u32(what)? as i32 as i64),
            6 => Meta::Float(f32::from_le_bytes(self.bytes(what)?) as f64),
            7 => Meta::Bool(self.bytes::<1>(what)? != [0]),
            8 => Meta::Str(self.string(what)?),
            9 => {
                if depth > 2 {
                    bail!("{what}: arrays nested too deeply");
                }
                let elem = self.u32(what)?;
                let min = match elem {
                    0 | 1 | 7 => 1,
                    2 | 3 => 2,
                    4..=6 => 4,
                    _ => 8,
                };
                let what_n = format!("element count of {what}");
                let n = self.count(min, &what_n)?;
                self.charge::<Meta>(n, &what_n)?;
                let mut v = Vec::with_capacity(n);
                for _ in 0..n {
                    v.push(self.value(elem, what, depth + 1)?);
                }
                Meta::Array(v)
            }
            10 => Meta::UInt(self.u64(what)?),
            11 => Meta::Int(self.u64(what)? as i64),
            12 => Meta::Float(f64::from_le_bytes(self.bytes(what)?)),
            t => bail!("{what}: unknown metadata value type {t}"),
        })
    }
}

impl Gguf {
    pub fn open(path: &Path) -> Result<Gguf> {
        Self::parse_named(path, FileBytes::open(path)?)
    }

    /// Parses `bytes` as the GGUF file `path` would be parsed (a file handed over in memory,
    /// fuzz targets, tests).
    pub fn from_bytes(path: &Path, bytes: &[u8]) -> Result<Gguf> {
        Self::parse_named(path, FileBytes::copy(bytes))
    }

    fn parse_named(path: &Path, map: FileBytes) -> Result<Gguf> {
        Self::parse(path, map).with_context(|| format!("{} is not a valid GGUF file", path.display()))
    }

    fn parse(path: &Path, map: FileBytes) -> Result<Gguf> {
        let mut c = Cursor { b: &map, pos: 0, budget: map.len().saturating_add(ALLOC_SLACK) };
        if c.take(4, "magic")? != b"GGUF" {
            bail!("bad magic (expected \"GGUF\")");
        }
        let version = c.u32("version")?;
        if !(2..=3).contains(&version) {
            bail!("GGUF version {version} is not supported (2 and 3 are)");
        }
        // A tensor info takes at least 24 bytes, a metadata entry at least 13.
        let n_tensors = c.count(24, "tensor count")?;
        let n_meta = c.count(13, "metadata count")?;
        let mut meta = HashMap::new();
        for _ in 0..n_meta {
            let key = c.string("metadata key")?;
            let ty = c.u32(&key)?;
            let v = c.value(ty, &key, 0)?;
            // As llama.cpp's reader: a key or tensor listed twice is an error, not the last wins.
            if meta.contains_key(&key) {
                bail!("metadata key {key} appears twice");
            }
            meta.insert(key, v);
        }
        c.charge::<RawInfo>(n_tensors, "tensor count")?;
        let mut infos: Vec<RawInfo> = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let n_dims = c.u32(&name)?;
            if n_dims == 0 || n_dims > 4 {
                bail!("tensor {name}: {n_dims} dimensions (1 to 4 allowed)");
            }
            let mut ne = Vec::new();
            for _ in 0..n_dims {
                ne.push(c.u64(&name)?);
            }
            let ty = c.u32(&name)?;
            let offset = c.u64(&name)?;
            infos.push((name, ne, ty, offset));
        }
        let align = match meta.get("general.alignment") {
            None => 32,
            Some(m) => m
                .as_u64()
                .filter(|a| a.is_power_of_two() && *a <= 1 << 16)
                .context("general.alignment must be a power of two")?,
        } as usize;
        let data_start = c.pos.next_multiple_of(align);
        let mut tensors = HashMap::new();
        for (name, ne, ty, offset) in infos {
            let dtype = DType::from_ggml(ty).with_context(|| {
                format!("tensor {name}: ggml type {ty} is not supported ({} are)", DType::GGML_NAMES)
            })?;
            let elems = ne
                .iter()
                .try_fold(1u64, |a, &d| a.checked_mul(d))
                .with_context(|| format!("tensor {name}: shape {ne:?} overflows"))?;
            let block = dtype.block().0;
            if !ne[0].is_multiple_of(block as u64) {
                bail!(
                    "tensor {name}: rows of {} values (shape {ne:?}) are not whole {dtype:?} blocks of {block}",
                    ne[0]
                );
            }
            let bytes = usize::try_from(elems)
                .ok()
                .and_then(|n| dtype.bytes_for(n))
                .with_context(|| format!("tensor {name}: shape {ne:?} is too large to address"))?;
            if !offset.is_multiple_of(align as u64) {
                bail!("tensor {name}: data offset {offset} is not a multiple of the file's alignment {align}");
            }
            // Checked, not cast: on 32-bit targets (the browser) a cast would wrap.
            let start = usize::try_from(offset).ok().and_then(|o| data_start.checked_add(o));
            let end = start.and_then(|s| s.checked_add(bytes));
            let (start, end) = match (start, end) {
                (Some(s), Some(e)) if e <= map.len() => (s, e),
                _ => bail!(
                    "tensor {name}: data at offset {offset} ({bytes} bytes) lies past the end of the file ({} bytes)",
                    map.len()
                ),
            };
            let shape = ne.iter().rev().map(|&d| d as usize).collect();
            if tensors.contains_key(&name) {
                bail!("tensor {name} appears twice");
            }
            tensors.insert(name, TensorInfo { dtype, shape, range: start..end });
        }
        // Writers lay tensors end to end; overlapping ones would read each other's bytes. Sorted
        // by start, any overlap shows between neighbours.
        let mut spans: Vec<(&std::ops::Range<usize>, &String)> =
            tensors.iter().filter(|(_, t)| !t.range.is_empty()).map(|(n, t)| (&t.range, n)).collect();
        spans.sort_unstable_by_key(|(r, n)| (r.start, r.end, *n));
        if let Some(w) = spans.windows(2).find(|w| w[1].0.start < w[0].0.end) {
            bail!("tensors {} and {} overlap: their data share byte {} of the file", w[0].1, w[1].1, w[1].0.start);
        }
        Ok(Gguf { path: path.to_path_buf(), version, meta, tensors, map })
    }

    pub fn get(&self, key: &str) -> Option<&Meta> {
        self.meta.get(key)
    }

    /// A string the engine reads: `None` where absent, an error naming the key where the value
    /// is of another type (read as absent, it would silently change what the model does).
    pub fn str(&self, key: &str) -> Result<Option<&str>> {
        self.typed(key, "a string", Meta::as_str)
    }

    pub fn bool(&self, key: &str) -> Result<Option<bool>> {
        self.typed(key, "a boolean", |m| match m {
            Meta::Bool(b) => Some(*b),
            _ => None,
        })
    }

    fn typed<'a, T>(&'a self, key: &str, what: &str, read: impl Fn(&'a Meta) -> Option<T>) -> Result<Option<T>> {
        self.get(key)
            .map(|v| read(v).with_context(|| format!("metadata {key} must be {what}, found {}", v.describe())))
            .transpose()
    }

    /// `tokenizer.ggml.bos_token_id`, where present (`token_id`).
    pub fn bos_id(&self) -> Result<Option<u32>> {
        self.token_id("tokenizer.ggml.bos_token_id")
    }

    /// `tokenizer.ggml.eos_token_id`, where present (`token_id`).
    pub fn eos_id(&self) -> Result<Option<u32>> {
        self.token_id("tokenizer.ggml.eos_token_id")
    }

    /// A token id of the metadata: an integer naming one of the file's `tokenizer.ggml.tokens`.
    /// One past the vocabulary could never be generated (an EOS that never stops) nor embedded.
    fn token_id(&self, key: &str) -> Result<Option<u32>> {
        let tokens = self.get("tokenizer.ggml.tokens").and_then(Meta::as_array).map(|t| t.len() as u64);
        let what = match tokens {
            Some(n) => format!("a token id below the {n} tokens of tokenizer.ggml.tokens"),
            None => "a token id".into(),
        };
        let in_vocab = |id: &u64| tokens.is_none_or(|n| *id < n);
        self.typed(key, &what, |m| m.as_u64().filter(in_vocab).and_then(|id| u32::try_from(id).ok()))
    }

    fn arch(&self) -> Result<(&str, Arch)> {
        let name = self.str("general.architecture")?.context("missing metadata general.architecture")?;
        let arch = match name {
            "llama" => Arch::Llama,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "gemma3" => Arch::Gemma3,
            other => bail!("GGUF architecture {other:?} is not supported (llama, qwen2, qwen3 and gemma3 are)"),
        };
        Ok((name, arch))
    }

    fn uint(&self, key: &str) -> Result<usize> {
        let v = self.get(key).with_context(|| format!("missing metadata {key}"))?;
        v.as_u64().and_then(valid_size).with_context(|| {
            format!("metadata {key} must be a positive integer up to {MAX_SIZE}, found {}", v.describe())
        })
    }

    fn float(&self, key: &str) -> Result<Option<f32>> {
        self.typed(key, "a number", |m| m.as_f64().map(|f| f as f32))
    }

    /// A float the model needs positive and finite (a base or an epsilon), where present.
    fn positive_float(&self, key: &str) -> Result<Option<f32>> {
        self.float(key)?.map(|f| positive(f).with_context(|| format!("metadata {key}"))).transpose()
    }

    /// The engine's configuration from `{arch}.*` metadata.
    pub fn config(&self) -> Result<ModelConfig> {
        let (a, arch) = self.arch()?;
        let k = |s: &str| format!("{a}.{s}");
        let hidden = self.uint(&k("embedding_length"))?;
        let heads = self.uint(&k("attention.head_count"))?;
        let kv_heads = if self.get(&k("attention.head_count_kv")).is_some() {
            self.uint(&k("attention.head_count_kv"))?
        } else {
            heads
        };
        let head_dim = match () {
            _ if self.get(&k("attention.key_length")).is_some() => self.uint(&k("attention.key_length"))?,
            // llama.cpp's default for gemma3.
            _ if arch == Arch::Gemma3 => 256,
            _ => hidden / heads,
        };
        let vocab = match self.get("tokenizer.ggml.tokens").and_then(Meta::as_array) {
            Some(t) => valid_size(t.len() as u64).with_context(|| {
                format!("metadata tokenizer.ggml.tokens holds {} tokens (1 to {MAX_SIZE})", t.len())
            })?,
            None => self.uint(&k("vocab_size"))?,
        };
        // The product in u64: on 32-bit targets (the browser) usize would wrap.
        if heads % kv_heads != 0 || head_dim == 0 || head_dim % 2 != 0 || heads as u64 * head_dim as u64 > MAX_SIZE {
            bail!("{heads} heads / {kv_heads} KV heads of dimension {head_dim} are not a valid attention shape");
        }
        let layers = self.uint(&k("block_count"))?;
        Ok(ModelConfig {
            arch,
            hidden,
            layers,
            heads,
            kv_heads,
            head_dim,
            intermediate: self.uint(&k("feed_forward_length"))?,
            vocab,
            rms_eps: self.positive_float(&k("attention.layer_norm_rms_epsilon"))?.unwrap_or(1e-6),
            rope_theta: self.positive_float(&k("rope.freq_base"))?.unwrap_or(10000.0),
            rope_scaling: match self.rope_divisors(head_dim)? {
                Some(divisors) => RopeScaling::Divisors(divisors),
                None => self.rope_scaling(a)?,
            },
            qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3),
            block: match arch {
                Arch::Gemma3 => self.gemma3_block(a, hidden, heads, head_dim, layers)?,
                _ => BlockOptions::default(),
            },
            tie_embeddings: !self.tensors.contains_key("output.weight"),
            max_position: if self.get(&k("context_length")).is_some() {
                self.uint(&k("context_length"))?
            } else {
                4096
            },
            eos_ids: self.eos_id()?.into_iter().collect(),
            bos_id: self.bos_id()?,
        })
    }

    /// `{arch}.rope.scaling.type` / `.factor`: linear scaling (llama.cpp divides the
    /// frequencies by the factor; Gemma 3: of the global layers only). A factor of 1 is none.
    fn rope_scaling(&self, a: &str) -> Result<RopeScaling> {
        let factor = self.float(&format!("{a}.rope.scaling.factor"))?;
        let kind = self.str(&format!("{a}.rope.scaling.type"))?;
        Ok(match (kind, factor) {
            (Some("none"), _) | (_, None) => RopeScaling::None,
            (_, Some(1.0)) => RopeScaling::None,
            (None | Some("linear"), Some(factor)) if factor > 0.0 && factor.is_finite() => {
                RopeScaling::Linear { factor }
            }
            (kind, Some(factor)) => {
                bail!("metadata {a}.rope.scaling: type {kind:?} with factor {factor} is not supported (linear is)")
            }
        })
    }

    /// Gemma 3 as llama.cpp reads it (llama-model.cpp, LLM_ARCH_GEMMA3): every sixth layer global,
    /// the others local with a window of `attention.sliding_window` and RoPE base 10000; the
    /// attention scale 1 / sqrt(head_dim) (1 / sqrt(hidden / heads) for the 62-layer 27B); norm
    /// weights stored as 1 + w by the converter.
    fn gemma3_block(
        &self,
        a: &str,
        hidden: usize,
        heads: usize,
        head_dim: usize,
        layers: usize,
    ) -> Result<BlockOptions> {
        for cap in ["final_logit_softcapping", "attn_logit_softcapping"] {
            if let Some(v) = self.float(&format!("{a}.{cap}"))? {
                bail!("metadata {a}.{cap} is {v}: logit softcapping is not supported");
            }
        }
        let scalar = if layers == 62 { hidden / heads } else { head_dim };
        Ok(BlockOptions {
            embed_scale: Some((hidden as f64).sqrt() as f32),
            norm_offset: 0.0,
            post_norms: true,
            activation: Activation::GeluTanh,
            attn_scale: Some((1.0 / (scalar as f64).sqrt()) as f32),
            sliding_window: Some(self.uint(&format!("{a}.attention.sliding_window"))?),
            local_layers: (0..layers).map(|i| (i + 1) % 6 != 0).collect(),
            local_rope_theta: Some(10000.0),
        })
    }

    /// `rope_freqs.weight`, where llama.cpp's converter stores llama3 RoPE scaling: one f32
    /// divisor per frequency (head_dim / 2 of them), positive and finite.
    fn rope_divisors(&self, head_dim: usize) -> Result<Option<Vec<f32>>> {
        let name = "rope_freqs.weight";
        let Some(t) = self.tensors.get(name) else { return Ok(None) };
        if t.dtype != DType::F32 || t.shape != [head_dim / 2] {
            bail!("tensor {name} is {:?} {:?}; expected F32 [{}] (head_dim / 2)", t.dtype, t.shape, head_dim / 2);
        }
        let bytes = &self.map[t.range.clone()];
        let divisors: Vec<f32> = bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if let Some(bad) = divisors.iter().find(|d| !(d.is_finite() && **d > 0.0)) {
            bail!("tensor {name} holds {bad}; RoPE frequency divisors must be positive and finite");
        }
        Ok(Some(divisors))
    }

    /// Bytes of all tensor data (what the weights take in the file).
    pub fn data_bytes(&self) -> u64 {
        self.tensors.values().map(|t| t.range.len() as u64).sum()
    }
}

impl Gguf {
    fn gguf_name(&self, hf: &str) -> Result<Option<String>> {
        Ok(gguf_name(hf, self.str("general.architecture")? == Some("gemma3")))
    }

    fn host(&self, name: &str, t: &TensorInfo) -> HostTensor<'_> {
        HostTensor {
            name: name.to_string(),
            dtype: t.dtype,
            shape: t.shape.clone(),
            bytes: &self.map[t.range.clone()],
            origin: self.path.display().to_string(),
        }
    }
}

/// The GGUF name of an engine (Hugging Face) tensor name; `post_norms`: the block has norms
/// after attention and MLP (gemma3), whose names shift those of the MLP's input norm.
fn gguf_name(hf: &str, post_norms: bool) -> Option<String> {
    let fixed = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("lm_head.weight", "output.weight"),
    ];
    if let Some((_, g)) = fixed.iter().find(|(h, _)| *h == hf) {
        return Some(g.to_string());
    }
    let rest = hf.strip_prefix("model.layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let parts = [
        ("input_layernorm", "attn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("self_attn.q_norm", "attn_q_norm"),
        ("self_attn.k_norm", "attn_k_norm"),
        ("post_attention_layernorm", "ffn_norm"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
    ];
    let post = [
        ("post_attention_layernorm", "post_attention_norm"),
        ("pre_feedforward_layernorm", "ffn_norm"),
        ("post_feedforward_layernorm", "post_ffw_norm"),
    ];
    let (module, kind) = part.rsplit_once('.')?;
    let found = |table: &[(&str, &'static str)]| table.iter().find(|(h, _)| *h == module).map(|(_, g)| *g);
    let g = if post_norms { found(&post).or_else(|| found(&parts)) } else { found(&parts) }?;
    Some(format!("blk.{layer}.{g}.{kind}"))
}

impl TensorSource for Gguf {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>> {
        let Some(g) = self.gguf_name(name)? else { return Ok(None) };
        Ok(self.tensors.get(&g).map(|t| self.host(&g, t)))
    }

    fn file_name(&self, name: &str) -> String {
        self.gguf_name(name).ok().flatten().unwrap_or_else(|| name.to_string())
    }

    fn every_tensor(&self) -> Vec<HostTensor<'_>> {
        let mut names: Vec<&String> = self.tensors.keys().collect();
        names.sort();
        names.into_iter().map(|n| self.host(n, &self.tensors[n])).collect()
    }

    /// llama.cpp's converter stores the q and k rows of `llama` models with each RoPE pair
    /// adjacent, which is the order the engine uses.
    fn qk_rows_pair_adjacent(&self) -> bool {
        matches!(self.str("general.architecture"), Ok(Some("llama")))
    }
}
