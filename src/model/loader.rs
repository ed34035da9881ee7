//! Builds the GPU weights of a decoder from any tensor source: checks every shape, fuses
//! Wq/Wk/Wv (pair-adjacent RoPE rows) and Wgate/Wup (interleaved), uploads.

use anyhow::{Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use super::config::ModelConfig;
use super::tensor::{HostTensor, TensorSource};
use crate::gpu::Gpu;
use crate::ops::qkv_rope::{fused_row_order, HeadShape};
use crate::ops::swiglu::interleaved_row_order;
use crate::ops::weight::gather_rows;
use crate::ops::{Weight, WeightType};

pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    pub qkv: Weight,
    pub qkv_bias: Option<wgpu::Buffer>,
    pub o: Weight,
    pub mlp_norm: wgpu::Buffer,
    pub gate_up: Weight,
    pub down: Weight,
}

pub struct Weights {
    pub embed: Weight,
    pub layers: Vec<LayerWeights>,
    pub final_norm: wgpu::Buffer,
    /// `None` when the LM head is tied to the embedding.
    pub lm_head: Option<Weight>,
    pub inv_freq: wgpu::Buffer,
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

struct Loader<'a> {
    gpu: &'a Gpu,
    src: &'a dyn TensorSource,
    bar: ProgressBar,
}

impl Loader<'_> {
    /// `name`, which must have shape `shape`.
    fn tensor(&self, name: &str, shape: &[usize]) -> Result<HostTensor<'_>> {
        let t = self.src.tensor(name)?.with_context(|| format!("missing tensor {name}"))?;
        t.check_shape(shape)?;
        Ok(t)
    }

    fn get(&self, name: &str, shape: &[usize]) -> Result<HostTensor<'_>> {
        let t = self.tensor(name, shape)?;
        self.bar.inc(1);
        Ok(t)
    }

    /// Checks the tensors that hold each size of the config the loader sizes its tables from
    /// (row orders, layer list), before any of them is allocated: a config claiming more than
    /// its files hold is an error naming the tensor, not an allocation the files cannot back.
    fn check_sizes(&self, cfg: &ModelConfig) -> Result<()> {
        let (d, hd, last) = (cfg.hidden, cfg.head_dim, cfg.layers - 1);
        let shapes = [
            ("model.embed_tokens.weight".to_string(), vec![cfg.vocab, d]),
            ("model.layers.0.self_attn.q_proj.weight".to_string(), vec![cfg.heads * hd, d]),
            ("model.layers.0.self_attn.k_proj.weight".to_string(), vec![cfg.kv_heads * hd, d]),
            ("model.layers.0.mlp.gate_proj.weight".to_string(), vec![cfg.intermediate, d]),
            (format!("model.layers.{last}.input_layernorm.weight"), vec![d]),
        ];
        for (name, shape) in shapes {
            self.tensor(&name, &shape)?;
        }
        Ok(())
    }

    fn f32_buffer(&self, name: &str, len: usize) -> Result<wgpu::Buffer> {
        let t = self.get(name, &[len])?;
        self.gpu.storage_from(name, bytemuck::cast_slice(&t.to_f32()))
    }

    /// Rows of several `[rows_i, cols]` tensors stacked, reordered by `order`, uploaded.
    fn fused(&self, label: &str, parts: &[(&str, usize)], cols: usize, order: &[usize]) -> Result<Weight> {
        let tensors = parts.iter().map(|(n, rows)| self.get(n, &[*rows, cols])).collect::<Result<Vec<_>>>()?;
        let ty = gpu_type(&tensors);
        let mut stacked = Vec::new();
        for t in &tensors {
            stacked.extend(t.to_weight_bytes(ty)?);
        }
        let row_bytes = ty
            .row_bytes(cols)
            .with_context(|| format!("{label}: {cols} columns are not whole {} blocks", ty.name()))?;
        Weight::upload(self.gpu, label, ty, order.len(), cols, &gather_rows(&stacked, row_bytes, order))
    }

    fn matrix(&self, name: &str, rows: usize, cols: usize) -> Result<Weight> {
        let identity: Vec<usize> = (0..rows).collect();
        self.fused(name, &[(name, rows)], cols, &identity)
    }
}

/// The storage a fused weight gets: its parts' type when they agree (quantized stays
/// quantized); otherwise f32 if any part is f32, else f16.
fn gpu_type(ts: &[HostTensor]) -> WeightType {
    let first = ts[0].dtype.gpu_type();
    if ts.iter().all(|t| t.dtype.gpu_type() == first) {
        first
    } else if ts.iter().any(|t| t.dtype.gpu_type() == WeightType::F32) {
        WeightType::F32
    } else {
        WeightType::F16
    }
}

/// Number of tensors `load_weights` reads (for the progress bar).
fn tensor_count(cfg: &ModelConfig) -> u64 {
    (cfg.layers * 9 + 2 + usize::from(!cfg.tie_embeddings)) as u64
}

pub fn load_weights(gpu: &Gpu, cfg: &ModelConfig, src: &dyn TensorSource) -> Result<Weights> {
    let bar = ProgressBar::new(tensor_count(cfg));
    bar.set_style(
        ProgressStyle::with_template("loading {bar:40} {pos}/{len} tensors")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let ld = Loader { gpu, src, bar };
    ld.check_sizes(cfg)?;
    let (d, hd, inter) = (cfg.hidden, cfg.head_dim, cfg.intermediate);
    let (qn, kvn) = (cfg.heads * hd, cfg.kv_heads * hd);
    let heads = HeadShape { n_heads: cfg.heads as u32, n_kv_heads: cfg.kv_heads as u32, head_dim: hd as u32 };
    let qkv_order = fused_row_order(&heads, src.qk_rows_pair_adjacent());
    let gate_up_order = interleaved_row_order(inter);
    let mut layers = Vec::with_capacity(cfg.layers);
    for i in 0..cfg.layers {
        let p = format!("model.layers.{i}");
        let (q, k, v) =
            (format!("{p}.self_attn.q_proj"), format!("{p}.self_attn.k_proj"), format!("{p}.self_attn.v_proj"));
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
        layers.push(LayerWeights {
            attn_norm: ld.f32_buffer(&format!("{p}.input_layernorm.weight"), d)?,
            qkv,
            qkv_bias,
            o: ld.matrix(&format!("{p}.self_attn.o_proj.weight"), d, qn)?,
            mlp_norm: ld.f32_buffer(&format!("{p}.post_attention_layernorm.weight"), d)?,
            gate_up: ld.fused(
                &format!("{p}.mlp.gate_up"),
                &[(&format!("{p}.mlp.gate_proj.weight"), inter), (&format!("{p}.mlp.up_proj.weight"), inter)],
                d,
                &gate_up_order,
            )?,
            down: ld.matrix(&format!("{p}.mlp.down_proj.weight"), d, inter)?,
        });
    }
    let embed = ld.matrix("model.embed_tokens.weight", cfg.vocab, d)?;
    let lm_head = if cfg.tie_embeddings { None } else { Some(ld.matrix("lm_head.weight", cfg.vocab, d)?) };
    let final_norm = ld.f32_buffer("model.norm.weight", d)?;
    let inv_freq = gpu.storage_from("inv_freq", bytemuck::cast_slice(&cfg.inv_freq()))?;
    ld.bar.finish_and_clear();
    Ok(Weights { embed, layers, final_norm, lm_head, inv_freq })
}
