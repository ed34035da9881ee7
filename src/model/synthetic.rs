//! Random-weight models with the exact shapes of real ones, for benchmarks: no weight files
//! travel to the machine being measured. Values are deterministic (a fixed xorshift stream);
//! quantized types get random blocks with finite f16 scales.

use std::collections::HashMap;

use anyhow::{bail, Result};
use half::f16;

use super::config::{Arch, ModelConfig, RopeScaling};
use super::tensor::{DType, HostTensor, TensorSource};

/// Configurations of the models the benchmarks use, as their config.json files give them.
pub fn preset(name: &str) -> Result<ModelConfig> {
    let base = ModelConfig {
        arch: Arch::Qwen2,
        hidden: 896,
        layers: 24,
        heads: 14,
        kv_heads: 2,
        head_dim: 64,
        intermediate: 4864,
        vocab: 151936,
        rms_eps: 1e-6,
        rope_theta: 1_000_000.0,
        rope_scaling: RopeScaling::None,
        qk_norm: false,
        block: Default::default(),
        tie_embeddings: true,
        max_position: 32768,
        eos_ids: vec![],
        bos_id: None,
    };
    Ok(match name {
        "qwen2.5-0.5b" => base,
        "llama-3.2-1b" => ModelConfig {
            arch: Arch::Llama,
            hidden: 2048,
            layers: 16,
            heads: 32,
            kv_heads: 8,
            intermediate: 8192,
            vocab: 128256,
            rms_eps: 1e-5,
            rope_theta: 500_000.0,
            rope_scaling: RopeScaling::Llama3 {
                factor: 32.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position: 8192.0,
            },
            max_position: 131072,
            ..base
        },
        "qwen2.5-1.5b" => {
            ModelConfig { hidden: 1536, layers: 28, heads: 12, head_dim: 128, intermediate: 8960, ..base }
        }
        "smollm2-135m" => ModelConfig {
            arch: Arch::Llama,
            hidden: 576,
            layers: 30,
            heads: 9,
            kv_heads: 3,
            intermediate: 1536,
            vocab: 49152,
            rms_eps: 1e-5,
            rope_theta: 100_000.0,
            max_position: 8192,
            ..base
        },
        other => bail!("unknown synthetic model {other:?} (qwen2.5-0.5b, qwen2.5-1.5b, llama-3.2-1b, smollm2-135m)"),
    })
}

pub struct Synthetic {
    tensors: HashMap<String, (DType, Vec<usize>, Vec<u8>)>,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// Uniform in [-scale, scale).
    fn value(&mut self, scale: f32) -> f32 {
        ((self.next() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
    }
}

impl Synthetic {
    /// Every tensor of `cfg` with weight matrices stored as `dtype` (norms and biases f32).
    pub fn new(cfg: &ModelConfig, dtype: DType) -> Result<Synthetic> {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut tensors = HashMap::new();
        let (d, qn, kvn, inter) = (cfg.hidden, cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim, cfg.intermediate);
        let mut matrix = |name: String, rows: usize, cols: usize| -> Result<()> {
            let bytes = random_bytes(&mut rng, dtype, rows * cols, 1.0 / (cols as f32).sqrt())?;
            tensors.insert(name, (dtype, vec![rows, cols], bytes));
            Ok(())
        };
        for i in 0..cfg.layers {
            let p = format!("model.layers.{i}");
            matrix(format!("{p}.self_attn.q_proj.weight"), qn, d)?;
            matrix(format!("{p}.self_attn.k_proj.weight"), kvn, d)?;
            matrix(format!("{p}.self_attn.v_proj.weight"), kvn, d)?;
            matrix(format!("{p}.self_attn.o_proj.weight"), d, qn)?;
            matrix(format!("{p}.mlp.gate_proj.weight"), inter, d)?;
            matrix(format!("{p}.mlp.up_proj.weight"), inter, d)?;
            matrix(format!("{p}.mlp.down_proj.weight"), d, inter)?;
        }
        matrix("model.embed_tokens.weight".into(), cfg.vocab, d)?;
        if !cfg.tie_embeddings {
            matrix("lm_head.weight".into(), cfg.vocab, d)?;
        }
        let mut vector = |name: String, len: usize, around: f32| {
            let v: Vec<f32> = (0..len).map(|_| around + rng.value(0.1)).collect();
            tensors.insert(name, (DType::F32, vec![len], bytemuck::cast_slice(&v).to_vec()));
        };
        for i in 0..cfg.layers {
            let p = format!("model.layers.{i}");
            vector(format!("{p}.input_layernorm.weight"), d, 1.0);
            vector(format!("{p}.post_attention_layernorm.weight"), d, 1.0);
            if cfg.arch == Arch::Qwen2 {
                vector(format!("{p}.self_attn.q_proj.bias"), qn, 0.0);
                vector(format!("{p}.self_attn.k_proj.bias"), kvn, 0.0);
                vector(format!("{p}.self_attn.v_proj.bias"), kvn, 0.0);
            }
        }
        vector("model.norm.weight".into(), d, 1.0);
        Ok(Synthetic { tensors })
    }
}

/// A random `[rows, cols]` weight stored as `dtype`, already in the GPU layout (for benchmarks
/// that upload one matrix): values within +-1/sqrt(cols), block scales small and finite.
pub fn random_gpu_weight(dtype: DType, rows: usize, cols: usize, seed: u64) -> Result<Vec<u8>> {
    let bytes = random_bytes(&mut Rng(seed | 1), dtype, rows * cols, 1.0 / (cols as f32).sqrt())?;
    Ok(super::quant::to_gpu_layout(dtype, &bytes))
}

/// `n` values uniform in [-scale, scale) (activations and logits for benchmarks).
pub fn random_values(n: usize, scale: f32, seed: u64) -> Vec<f32> {
    let mut rng = Rng(seed | 1);
    (0..n).map(|_| rng.value(scale)).collect()
}

fn random_bytes(rng: &mut Rng, dtype: DType, n: usize, scale: f32) -> Result<Vec<u8>> {
    Ok(match dtype {
        DType::F32 => (0..n).flat_map(|_| rng.value(scale).to_le_bytes()).collect(),
        DType::F16 => (0..n).flat_map(|_| f16::from_f32(rng.value(scale)).to_le_bytes()).collect(),
        DType::BF16 => bail!("synthetic weights are f32, f16 or a quantized type"),
        q => {
            let (per, size) = q.block();
            let mut out = Vec::with_capacity(n / per * size);
            for _ in 0..n / per {
                let start = out.len();
                out.extend((0..size).map(|_| rng.next() as u8));
                // Every f16 field of the block types is a scale: make them small and finite.
                let scale_at: &[usize] = match q {
                    DType::Q4_1 | DType::Q4_K | DType::Q5_1 | DType::Q5_K => &[0, 2],
                    DType::Q6_K => &[208],
                    DType::Q3_K => &[108],
                    DType::Q2_K => &[80, 82],
                    _ => &[0],
                };
                for &at in scale_at {
                    out[start + at..start + at + 2].copy_from_slice(&f16::from_f32(scale / 8.0).to_le_bytes());
                }
            }
            out
        }
    })
}

impl TensorSource for Synthetic {
    fn tensor(&self, name: &str) -> Result<Option<HostTensor<'_>>> {
        Ok(self.tensors.get(name).map(|(dtype, shape, bytes)| HostTensor {
            name: name.to_string(),
            dtype: *dtype,
            shape: shape.clone(),
            bytes,
            origin: "synthetic".to_string(),
        }))
    }

    fn every_tensor(&self) -> Vec<HostTensor<'_>> {
        let mut names: Vec<&String> = self.tensors.keys().collect();
        names.sort();
        names.into_iter().filter_map(|n| self.tensor(n).ok().flatten()).collect()
    }
}
