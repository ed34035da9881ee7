//! Builds the GPU weights of a decoder from any tensor source: checks every shape, fuses
//! Wq/Wk/Wv (pair-adjacent RoPE rows) and Wgate/Wup (interleaved where they share a type, stacked where not), uploads.

use std::cell::Cell;

use anyhow::{Context, Result};

use super::config::ModelConfig;
use super::tensor::{HostTensor, TensorSource};
use crate::gpu::Gpu;
use crate::ops::qkv_rope::{fused_row_order, pair_order, HeadShape};
use crate::ops::swiglu::interleaved_row_order;
use crate::ops::weight::{WeightLayout, WeightPiece};
use crate::ops::Weight;

pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    pub qkv: Weight,
    pub qkv_bias: Option<wgpu::Buffer>,
    /// The q and k per-head norm weights (head_dim each, q then k, in the fused weight's
    /// pair-adjacent order), where the model has them (Qwen3, Gemma 3).
    pub qk_norm: Option<wgpu::Buffer>,
    pub o: Weight,
    /// The MLP's input norm (`post_attention_layernorm`; with post-norms
    /// `pre_feedforward_layernorm`).
    pub mlp_norm: wgpu::Buffer,
    pub gate_up: Weight,
    pub down: Weight,
    /// The norms of the attention and MLP outputs, where the block has them (Gemma 3).
    pub post_norms: Option<[wgpu::Buffer; 2]>,
}

pub struct Weights {
    pub embed: Weight,
    pub layers: Vec<LayerWeights>,
    pub final_norm: wgpu::Buffer,
    /// `None` when the LM head is tied to the embedding.
    pub lm_head: Option<Weight>,
    pub inv_freq: wgpu::Buffer,
    /// The RoPE frequencies of local layers, where the model has them (Gemma 3).
    pub local_inv_freq: Option<wgpu::Buffer>,
    /// Bytes the weight matrices take in their files (what `gpu_bytes` should stay close to).
    pub file_bytes: u64,
}

impl Weights {
    pub fn lm_head(&self) -> &Weight {
        self.lm_head.as_ref().unwrap_or(&self.embed)
    }

    fn matrices(&self) -> impl Iterator<Item = &Weight> {
        let layers = self.layers.iter().flat_map(|l| [&l.qkv, &l.o, &l.gate_up, &l.down]);
        layers.chain(std::iter::once(&self.embed)).chain(self.lm_head.as_ref())
    }

    /// Bytes of weight matrices on the GPU.
    pub fn gpu_bytes(&self) -> u64 {
        self.matrices().map(Weight::gpu_bytes).sum()
    }

    /// What the same matrices would take as f16.
    pub fn f16_equivalent_bytes(&self) -> u64 {
        self.matrices().map(|w| u64::from(w.rows) * u64::from(w.cols) * 2).sum()
    }
}

/// `name` from `src`, which must have shape `shape`.
fn shaped_tensor<'a>(src: &'a dyn TensorSource, name: &str, shape: &[usize]) -> Result<HostTensor<'a>> {
    let t = src.tensor(name)?.with_context(|| format!("missing tensor {}", src.file_name(name)))?;
    t.check_shape(shape)?;
    Ok(t)
}

/// Checks the tensors that hold each size of the config the loader sizes its tables from
/// (row orders, layer list), before any of them is allocated: a config claiming more than
/// its files hold is an error naming the tensor, not an allocation the files cannot back.
/// Needs no GPU (the fuzz targets call it).
pub fn check_sizes(cfg: &ModelConfig, src: &dyn TensorSource) -> Result<()> {
    let (d, hd, last) = (cfg.hidden, cfg.head_dim, cfg.layers - 1);
    let shapes = [
        ("model.embed_tokens.weight".to_string(), vec![cfg.vocab, d]),
        ("model.layers.0.self_attn.q_proj.weight".to_string(), vec![cfg.heads * hd, d]),
        ("model.layers.0.self_attn.k_proj.weight".to_string(), vec![cfg.kv_heads * hd, d]),
        ("model.layers.0.mlp.gate_proj.weight".to_string(), vec![cfg.intermediate, d]),
        (format!("model.layers.{last}.input_layernorm.weight"), vec![d]),
    ];
    for (name, shape) in shapes {
        shaped_tensor(src, &name, &shape)?;
    }
    Ok(())
}

struct Loader<'a> {
    gpu: &'a Gpu,
    src: &'a dyn TensorSource,
    bar: ProgressBar,
    /// Bytes of the weight matrices read so far, as their files store them.
    file_bytes: Cell<u64>,
    /// The layout of the weight matrices (`WeightLayout::linear`; the embedding reads it too).
    linear: WeightLayout,
}

impl Loader<'_> {
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<HostTensor<'_>> {
        shaped_tensor(self.src, name, shape)
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<HostTensor<'_>> {
        let t = self.tensor(name, shape)?;
        self.bar.inc(1);
        Ok(t)
    }

    /// An RMSNorm weight, with `offset` added to each element (`BlockOptions::norm_offset`).
    fn norm(&self, name: &str, len: usize, offset: f32) -> Result<Vec<f32>> {
        Ok(self.get(name, &[len])?.to_f32().into_iter().map(|w| w + offset).collect())
    }

    fn norm_buffer(&self, name: &str, len: usize, offset: f32) -> Result<wgpu::Buffer> {
        self.gpu.storage_from(name, bytemuck::cast_slice(&self.norm(name, len, offset)?))
    }

    /// Rows of several `[rows_i, cols]` tensors stacked, reordered by `order` (indices into the
    /// stacked rows), uploaded. Each tensor's rows keep its own type: consecutive rows of one type
    /// are one part of the weight, so a fused projection whose tensors differ in type (llama.cpp's
    /// *_M files) takes what its file takes.
    fn fused(&self, label: &str, parts: &[(&str, usize)], cols: usize, order: &[usize]) -> Result<Weight> {
        let mut sources = Vec::with_capacity(parts.len());
        let mut first_row = 0;
        for (name, rows) in parts {
            let t = self.get(name, &[*rows, cols])?;
            self.file_bytes.set(self.file_bytes.get() + t.bytes.len() as u64);
            let ty = t.dtype.gpu_type();
            let row_bytes = ty
                .row_bytes(cols)
                .with_context(|| format!("tensor {}: {cols} columns are not whole {} blocks", t.name, ty.name()))?;
            sources.push((first_row, ty, row_bytes, t.to_weight_bytes(ty)?));
            first_row += rows;
        }
        let mut pieces: Vec<WeightPiece> = Vec::new();
        for &r in order {
            let (lo, ty, row_bytes, data) = sources.iter().rev().find(|s| s.0 <= r).context("row order")?;
            let row = &data[(r - lo) * row_bytes..(r - lo + 1) * row_bytes];
            match pieces.last_mut() {
                Some(p) if p.ty == *ty => {
                    p.rows += 1;
                    p.data.extend_from_slice(row);
                }
                _ => pieces.push(WeightPiece { ty: *ty, rows: 1, data: row.to_vec() }),
            }
        }
        Weight::upload_pieces(self.gpu, label, cols, pieces, self.linear)
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Weight> {
        let identity: Vec<usize> = (0..rows).collect();
        self.fused(name, &[(name, rows)], cols, &identity)
    }

    /// Whether the tensors share a GPU type (a missing one is reported when it is read).
    fn same_type(&self, names: &[&str]) -> Result<bool> {
        let mut types = Vec::new();
        for name in names {
            types.extend(self.src.tensor(name)?.map(|t| t.dtype.gpu_type()));
        }
        Ok(types.windows(2).all(|t| t[0] == t[1]))
    }
}

/// The load's progress on stderr.
#[cfg(not(target_arch = "wasm32"))]
type ProgressBar = indicatif::ProgressBar;

#[cfg(not(target_arch = "wasm32"))]
fn progress_bar(tensors: u64) -> ProgressBar {
    let style = indicatif::ProgressStyle::with_template("loading {bar:40} {pos}/{len} tensors");
    ProgressBar::new(tensors).with_style(style.unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()))
}

/// A page has no stderr to draw on.
#[cfg(target_arch = "wasm32")]
struct ProgressBar;

#[cfg(target_arch = "wasm32")]
impl ProgressBar {
    fn inc(&self, _: u64) {}
    fn finish_and_clear(&self) {}
}

#[cfg(target_arch = "wasm32")]
fn progress_bar(_: u64) -> ProgressBar {
    ProgressBar
}

/// Number of tensors `load_weights` reads (for the progress bar).
fn tensor_count(cfg: &ModelConfig) -> u64 {
    let per_layer = 9 + 2 * usize::from(cfg.qk_norm) + 2 * usize::from(cfg.block.post_norms);
    (cfg.layers * per_layer + 2 + usize::from(!cfg.tie_embeddings)) as u64
}

pub fn load_weights(gpu: &Gpu, cfg: &ModelConfig, src: &dyn TensorSource) -> Result<Weights> {
    let bar = progress_bar(tensor_count(cfg));
    let ld = Loader { gpu, src, bar, file_bytes: Cell::new(0), linear: WeightLayout::linear(gpu) };
    check_sizes(cfg, src)?;
    let (d, hd, inter) = (cfg.hidden, cfg.head_dim, cfg.intermediate);
    let (qn, kvn) = (cfg.heads * hd, cfg.kv_heads * hd);
    let offset = cfg.block.norm_offset;
    let heads = HeadShape { n_heads: cfg.heads as u32, n_kv_heads: cfg.kv_heads as u32, head_dim: hd as u32 };
    let qkv_order = fused_row_order(&heads, src.qk_rows_pair_adjacent());
    let head_order = pair_order(hd, src.qk_rows_pair_adjacent());
    // Gate and up rows interleave where they share a type, else stay stacked (ops/swiglu.rs).
    let (gate_up_interleaved, gate_up_stacked) = (interleaved_row_order(inter), (0..2 * inter).collect::<Vec<_>>());
    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let p = format!("model.layers.{i}");
        let (q, k, v) =
            (format!("{p}.self_attn.q_proj"), format!("{p}.self_attn.k_proj"), format!("{p}.self_attn.v_proj"));
        let (gate, up) = (format!("{p}.mlp.gate_proj.weight"), format!("{p}.mlp.up_proj.weight"));
        let gate_up_order = if ld.same_type(&[&gate, &up])? { &gate_up_interleaved } else { &gate_up_stacked };
        let qkv = ld.fused(
            &format!("{p}.self_attn.qkv"),
            &[(&format!("{q}.weight"), qn), (&format!("{k}.weight"), kvn), (&format!("{v}.weight"), kvn)],
            d,
            &qkv_order,
        )?;
        // Biases exist in Qwen2 (and Llama with attention_bias); their presence decides.
        let qkv_bias = if src.tensor(&format!("{q}.bias"))?.is_some() {
            let mut stacked = ld.get(&format!("{q}.bias"), &[qn])?.to_f32();
            stacked.extend(ld.get(&format!("{k}.bias"), &[kvn])?.to_f32());
            stacked.extend(ld.get(&format!("{v}.bias"), &[kvn])?.to_f32());
            let fused: Vec<f32> = qkv_order.iter().map(|&r| stacked[r]).collect();
            Some(gpu.storage_from("qkv_bias", bytemuck::cast_slice(&fused))?)
        } else {
            None
        };
        let qk_norm = if cfg.qk_norm {
            let mut fused = Vec::with_capacity(2 * hd);
            for part in ["q_norm", "k_norm"] {
                let w = ld.norm(&format!("{p}.self_attn.{part}.weight"), hd, offset)?;
                fused.extend(head_order.iter().map(|&i| w[i]));
            }
            Some(gpu.storage_from("qk_norm", bytemuck::cast_slice(&fused))?)
        } else {
            None
        };
        let post_norms = match cfg.block.post_norms {
            true => Some([
                ld.norm_buffer(&format!("{p}.post_attention_layernorm.weight"), d, offset)?,
                ld.norm_buffer(&format!("{p}.post_feedforward_layernorm.weight"), d, offset)?,
            ]),
            false => None,
        };
        let mlp_norm = if post_norms.is_some() { "pre_feedforward_layernorm" } else { "post_attention_layernorm" };
        layers.push(LayerWeights {
            attn_norm: ld.norm_buffer(&format!("{p}.input_layernorm.weight"), d, offset)?,
            qkv,
            qkv_bias,
            qk_norm,
            o: ld.matrix(&format!("{p}.self_attn.o_proj.weight"), d, qn)?,
            mlp_norm: ld.norm_buffer(&format!("{p}.{mlp_norm}.weight"), d, offset)?,
            gate_up: ld.fused(&format!("{p}.mlp.gate_up"), &[(&gate, inter), (&up, inter)], d, gate_up_order)?,
            down: ld.matrix(&format!("{p}.mlp.down_proj.weight"), d, inter)?,
            post_norms,
        });
    }
    let embed = ld.matrix("model.embed_tokens.weight", cfg.vocab, d)?;
    let lm_head = if cfg.tie_embeddings { None } else { Some(ld.matrix("lm_head.weight", cfg.vocab, d)?) };
    let final_norm = ld.norm_buffer("model.norm.weight", d, offset)?;
    let inv_freq = gpu.storage_from("inv_freq", bytemuck::cast_slice(&cfg.inv_freq()))?;
    let local_inv_freq = match cfg.local_inv_freq() {
        Some(f) => Some(gpu.storage_from("local_inv_freq", bytemuck::cast_slice(&f))?),
        None => None,
    };
    ld.bar.finish_and_clear();
    Ok(Weights { embed, layers, final_norm, lm_head, inv_freq, local_inv_freq, file_bytes: ld.file_bytes.get() })
}
