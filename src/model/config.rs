//! config.json of LlamaForCausalLM, Qwen2ForCausalLM and MistralForCausalLM, as the hub writes
//! it (transformers 4.x: `torch_dtype`, top-level `rope_theta`, `rope_scaling`) and as
//! transformers 5.x writes it (`dtype`, `rope_parameters`).

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Mistral,
}

/// How RoPE frequencies are derived.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    None,
    Linear { factor: f32 },
    Llama3 { factor: f32, low_freq_factor: f32, high_freq_factor: f32, original_max_position: f32 },
}

#[derive(Clone, Debug, PartialEq)]
pub struct ModelConfig {
    pub arch: Arch,
    pub hidden: usize,
    pub layers: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub intermediate: usize,
    pub vocab: usize,
    pub rms_eps: f32,
    pub rope_theta: f32,
    pub rope_scaling: RopeScaling,
    pub tie_embeddings: bool,
    pub max_position: usize,
    /// Token ids that end generation (config.json; generation_config.json adds to them).
    pub eos_ids: Vec<u32>,
    pub bos_id: Option<u32>,
}

/// Reads `path` (a config.json); errors name the file and the field.
pub fn read_config(path: &Path) -> Result<ModelConfig> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let v: Value = serde_json::from_str(&text).with_context(|| format!("{} is not valid JSON", path.display()))?;
    parse_config(&v).with_context(|| format!("in {}", path.display()))
}

fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value> {
    v.get(name).filter(|x| !x.is_null()).with_context(|| format!("missing field \"{name}\""))
}

/// The largest size (hidden, heads, head_dim, intermediate, vocabulary, layers, context) a model
/// file may give: far above any real model's, and small enough that the products the loader
/// sizes its tables from cannot overflow. A corrupt size is rejected here, before anything is
/// allocated from it.
pub const MAX_SIZE: u64 = 1 << 24;

/// `n` as a size: positive and at most `MAX_SIZE`.
pub fn valid_size(n: u64) -> Option<usize> {
    (1..=MAX_SIZE).contains(&n).then_some(n as usize)
}

fn usize_field(v: &Value, name: &str) -> Result<usize> {
    let x = field(v, name)?;
    x.as_u64()
        .and_then(valid_size)
        .with_context(|| format!("field \"{name}\" must be a positive integer up to {MAX_SIZE}, found {x}"))
}

fn f32_field(v: &Value, name: &str) -> Result<f32> {
    let x = field(v, name)?;
    x.as_f64().map(|f| f as f32).with_context(|| format!("field \"{name}\" must be a number, found {x}"))
}

/// An integer or a list of integers (eos_token_id takes both forms).
pub fn ids_field(v: &Value, name: &str) -> Vec<u32> {
    match v.get(name) {
        Some(Value::Number(n)) => n.as_u64().map(|n| vec![n as u32]).unwrap_or_default(),
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_u64()).map(|n| n as u32).collect(),
        _ => Vec::new(),
    }
}

pub fn parse_config(v: &Value) -> Result<ModelConfig> {
    let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
    let architecture = v.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str).unwrap_or("");
    let arch = match (architecture, model_type) {
        ("LlamaForCausalLM", _) | ("", "llama") => Arch::Llama,
        ("Qwen2ForCausalLM", _) | ("", "qwen2") => Arch::Qwen2,
        ("MistralForCausalLM", _) | ("", "mistral") => Arch::Mistral,
        _ => bail!(
            "unsupported architecture {:?} (model_type {:?}); supported: LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM",
            architecture,
            model_type
        ),
    };
    let hidden = usize_field(v, "hidden_size")?;
    let heads = usize_field(v, "num_attention_heads")?;
    let kv_heads = if v.get("num_key_value_heads").is_some_and(|x| !x.is_null()) {
        usize_field(v, "num_key_value_heads")?
    } else {
        heads
    };
    let head_dim =
        if v.get("head_dim").is_some_and(|x| !x.is_null()) { usize_field(v, "head_dim")? } else { hidden / heads };
    if heads % kv_heads != 0 {
        bail!("num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}");
    }
    if head_dim == 0 || head_dim % 2 != 0 {
        bail!("head_dim {head_dim} must be positive and even for RoPE");
    }
    // transformers 5.x nests RoPE settings in rope_parameters; 4.x has rope_theta + rope_scaling.
    let rope = v.get("rope_parameters").filter(|x| x.is_object());
    let rope_theta = match rope.filter(|r| r.get("rope_theta").is_some()) {
        Some(r) => f32_field(r, "rope_theta").context("in \"rope_parameters\"")?,
        None if v.get("rope_theta").is_some() => f32_field(v, "rope_theta")?,
        None => 10000.0,
    };
    let scaling = rope.or_else(|| v.get("rope_scaling").filter(|x| x.is_object()));
    let rope_scaling = match scaling {
        None => RopeScaling::None,
        Some(s) => {
            parse_rope_scaling(s).context("in the RoPE scaling settings (\"rope_scaling\" / \"rope_parameters\")")?
        }
    };
    let eos_ids = ids_field(v, "eos_token_id");
    Ok(ModelConfig {
        arch,
        hidden,
        layers: usize_field(v, "num_hidden_layers")?,
        heads,
        kv_heads,
        head_dim,
        intermediate: usize_field(v, "intermediate_size")?,
        vocab: usize_field(v, "vocab_size")?,
        rms_eps: if v.get("rms_norm_eps").is_some() { f32_field(v, "rms_norm_eps")? } else { 1e-6 },
        rope_theta,
        rope_scaling,
        tie_embeddings: v.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(false),
        max_position: if v.get("max_position_embeddings").is_some() {
            usize_field(v, "max_position_embeddings")?
        } else {
            4096
        },
        eos_ids,
        bos_id: ids_field(v, "bos_token_id").first().copied(),
    })
}

fn parse_rope_scaling(s: &Value) -> Result<RopeScaling> {
    let kind = s.get("rope_type").or_else(|| s.get("type")).and_then(Value::as_str).unwrap_or("default");
    Ok(match kind {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear { factor: f32_field(s, "factor")? },
        "llama3" => RopeScaling::Llama3 {
            factor: f32_field(s, "factor")?,
            low_freq_factor: f32_field(s, "low_freq_factor")?,
            high_freq_factor: f32_field(s, "high_freq_factor")?,
            original_max_position: f32_field(s, "original_max_position_embeddings")?,
        },
        other => bail!("RoPE type {other:?} is not supported (default, linear, llama3 are)"),
    })
}

impl ModelConfig {
    /// RoPE inverse frequencies, computed in f32 as transformers does.
    pub fn inv_freq(&self) -> Vec<f32> {
        let d = self.head_dim;
        let base: Vec<f32> = (0..d / 2).map(|i| 1.0 / self.rope_theta.powf((2 * i) as f32 / d as f32)).collect();
        match self.rope_scaling {
            RopeScaling::None => base,
            RopeScaling::Linear { factor } => base.iter().map(|f| f / factor).collect(),
            RopeScaling::Llama3 { factor, low_freq_factor, high_freq_factor, original_max_position } => {
                let low_wavelen = original_max_position / low_freq_factor;
                let high_wavelen = original_max_position / high_freq_factor;
                base.iter()
                    .map(|&f| {
                        let wavelen = 2.0 * std::f32::consts::PI / f;
                        if wavelen < high_wavelen {
                            f
                        } else if wavelen > low_wavelen {
                            f / factor
                        } else {
                            let smooth = (original_max_position / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * f / factor + smooth * f
                        }
                    })
                    .collect()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn base() -> Value {
        json!({"architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 2,
               "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 160,
               "vocab_size": 384, "rms_norm_eps": 1e-5, "eos_token_id": [2, 7]})
    }

    #[test]
    fn both_rope_styles_give_the_same_config() {
        let mut old = base();
        old["rope_theta"] = json!(500000.0);
        old["rope_scaling"] = json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                     "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
        let mut new = base();
        new["rope_parameters"] = json!({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192});
        let (a, b) = (parse_config(&old).unwrap(), parse_config(&new).unwrap());
        assert_eq!(a, b);
        assert_eq!(a.rope_theta, 500000.0);
        assert_eq!(a.head_dim, 16);
        assert_eq!(a.eos_ids, [2, 7]);
        // llama3 scaling: high frequencies kept, low ones divided by the factor.
        let (base_freq, scaled) =
            (ModelConfig { rope_scaling: RopeScaling::None, ..a.clone() }.inv_freq(), a.inv_freq());
        assert_eq!(scaled[0], base_freq[0]);
        assert!((scaled[7] - base_freq[7] / 8.0).abs() < 1e-12);
    }

    #[test]
    fn errors_name_the_field() {
        let mut c = base();
        c["num_key_value_heads"] = json!(3);
        assert!(format!("{:#}", parse_config(&c).unwrap_err()).contains("num_key_value_heads"));
        let mut c = base();
        c["rope_scaling"] = json!({"rope_type": "yarn", "factor": 4.0});
        assert!(format!("{:#}", parse_config(&c).unwrap_err()).contains("yarn"));
        let mut c = base();
        c["hidden_size"] = json!("big");
        assert!(format!("{:#}", parse_config(&c).unwrap_err()).contains("hidden_size"));
    }
}
