//! config.json of LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM and
//! Gemma3ForCausalLM (text), as the hub writes it (transformers 4.x: `torch_dtype`, top-level
//! `rope_theta`, `rope_scaling`; Gemma 3: `rope_local_base_freq`, `sliding_window_pattern`) and
//! as transformers 5.x writes it (`dtype`, `rope_parameters`, per layer type for Gemma 3).

use super::folder::ModelFolder;

use anyhow::{bail, Context, Result};
use serde_json::Value;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    Llama,
    Qwen2,
    Qwen3,
    Mistral,
    Gemma3,
}

/// The MLP's activation of the gate (the epilogue of `swiglu`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Activation {
    /// silu(gate) * up (SwiGLU).
    #[default]
    Silu,
    /// gelu(gate) * up with GELU's tanh approximation (GeGLU; `gelu_pytorch_tanh`).
    GeluTanh,
}

/// How a decoder block departs from Llama's; the default is Llama's block. Every option is a
/// property of existing kernels (a prologue, an epilogue, a window), not another model.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockOptions {
    /// The embedding rows are multiplied by this (Gemma: sqrt(hidden), in f32 as the
    /// activations are).
    pub embed_scale: Option<f32>,
    /// Added to every RMSNorm weight at load (exact in f32): Gemma's norms scale by (1 + w) and
    /// its Hugging Face files store w; llama.cpp's GGUF stores 1 + w already, so 0 there.
    pub norm_offset: f32,
    /// RMSNorms of the attention and MLP outputs before they are added onto the residual
    /// (Gemma: `post_attention_layernorm`, `post_feedforward_layernorm`; the MLP's input norm is
    /// then `pre_feedforward_layernorm`).
    pub post_norms: bool,
    pub activation: Activation,
    /// The attention's score scale; `None`: 1 / sqrt(head_dim). Gemma: query_pre_attn_scalar^-0.5.
    pub attn_scale: Option<f32>,
    /// Positions a local layer attends to, its own included (`sliding_window`).
    pub sliding_window: Option<usize>,
    /// Per layer, whether it is local (sliding-window attention, `local_rope_theta`, no RoPE
    /// scaling); empty when every layer is global.
    pub local_layers: Vec<bool>,
    /// The RoPE base of local layers (Gemma: `rope_local_base_freq`).
    pub local_rope_theta: Option<f32>,
}

/// How RoPE frequencies are derived.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    None,
    Linear {
        factor: f32,
    },
    Llama3 {
        factor: f32,
        low_freq_factor: f32,
        high_freq_factor: f32,
        original_max_position: f32,
    },
    /// One divisor per frequency (GGUF's `rope_freqs.weight`, head_dim / 2 values): llama.cpp's
    /// converter stores llama3 scaling this way, as 1 / (the llama3 factor of each frequency).
    Divisors(Vec<f32>),
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
    /// q and k get a per-head RMSNorm (weights `q_norm` / `k_norm`, head_dim each, eps
    /// `rms_eps`) after the projection and before RoPE (Qwen3, Gemma 3).
    pub qk_norm: bool,
    /// Gemma 3's departures from the Llama block (the default for the others).
    pub block: BlockOptions,
    pub tie_embeddings: bool,
    pub max_position: usize,
    /// Token ids that end generation (config.json; generation_config.json adds to them).
    pub eos_ids: Vec<u32>,
    pub bos_id: Option<u32>,
}

/// Reads the folder's config.json; errors name the file and the field.
pub fn read_config(folder: &ModelFolder) -> Result<ModelConfig> {
    let path = folder.file_path("config.json");
    let v =
        folder.read_json("config.json")?.with_context(|| format!("cannot read {}: no such file", path.display()))?;
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

/// A float the model needs positive and finite (every float of a config is a base, a factor,
/// an epsilon or a scale): NaN or 0 would turn into NaN frequencies or scores, not an error.
fn f32_field(v: &Value, name: &str) -> Result<f32> {
    let x = field(v, name)?;
    let f = x.as_f64().map(|f| f as f32).with_context(|| format!("field \"{name}\" must be a number, found {x}"))?;
    positive(f).with_context(|| format!("field \"{name}\""))
}

/// `x` where it is positive and finite.
pub fn positive(x: f32) -> Result<f32> {
    anyhow::ensure!(x.is_finite() && x > 0.0, "must be positive and finite, found {x}");
    Ok(x)
}

/// An integer or a list of integers (eos_token_id takes both forms).
pub fn ids_field(v: &Value, name: &str) -> Vec<u32> {
    match v.get(name) {
        // Ids past u32 name no token (a cast would wrap them onto one).
        Some(Value::Number(n)) => n.as_u64().and_then(|n| u32::try_from(n).ok()).into_iter().collect(),
        Some(Value::Array(a)) => a.iter().filter_map(|x| x.as_u64()).filter_map(|n| u32::try_from(n).ok()).collect(),
        _ => Vec::new(),
    }
}

pub fn parse_config(v: &Value) -> Result<ModelConfig> {
    let model_type = v.get("model_type").and_then(Value::as_str).unwrap_or("");
    let architecture = v.get("architectures").and_then(|a| a.get(0)).and_then(Value::as_str).unwrap_or("");
    let arch = match (architecture, model_type) {
        ("LlamaForCausalLM", _) | ("", "llama") => Arch::Llama,
        ("Qwen2ForCausalLM", _) | ("", "qwen2") => Arch::Qwen2,
        ("Qwen3ForCausalLM", _) | ("", "qwen3") => Arch::Qwen3,
        ("MistralForCausalLM", _) | ("", "mistral") => Arch::Mistral,
        ("Gemma3ForCausalLM", _) | ("", "gemma3_text") => Arch::Gemma3,
        _ => bail!(
            "unsupported architecture {:?} (model_type {:?}); supported: LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, MistralForCausalLM, Gemma3ForCausalLM",
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
    let gemma = arch == Arch::Gemma3;
    let head_dim = match () {
        _ if present(v, "head_dim") => usize_field(v, "head_dim")?,
        // Gemma3TextConfig's default.
        _ if gemma => 256,
        _ => hidden / heads,
    };
    if heads % kv_heads != 0 {
        bail!("num_attention_heads {heads} is not a multiple of num_key_value_heads {kv_heads}");
    }
    if head_dim == 0 || head_dim % 2 != 0 {
        bail!("head_dim {head_dim} must be positive and even for RoPE");
    }
    // The q projection's rows, in u64: on 32-bit targets (the browser) usize would wrap.
    if heads as u64 * head_dim as u64 > MAX_SIZE {
        bail!("num_attention_heads {heads} x head_dim {head_dim} is over {MAX_SIZE}");
    }
    // transformers 5.x nests RoPE settings in rope_parameters (Gemma 3: one entry per layer
    // type, "full_attention" for the global layers); 4.x has rope_theta + rope_scaling.
    let rope = v.get("rope_parameters").filter(|x| x.is_object());
    let rope = match gemma {
        true => rope.and_then(|r| r.get("full_attention")).filter(|x| x.is_object()),
        false => rope,
    };
    let rope_theta = match rope.filter(|r| r.get("rope_theta").is_some()) {
        Some(r) => f32_field(r, "rope_theta").context("in \"rope_parameters\"")?,
        None if v.get("rope_theta").is_some() => f32_field(v, "rope_theta")?,
        None if gemma => 1_000_000.0,
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
    let layers = usize_field(v, "num_hidden_layers")?;
    let block = match arch {
        Arch::Gemma3 => gemma3_block(v, layers, hidden)?,
        _ => windowed_block(v, arch, layers)?,
    };
    Ok(ModelConfig {
        arch,
        hidden,
        layers,
        heads,
        kv_heads,
        head_dim,
        intermediate: usize_field(v, "intermediate_size")?,
        vocab: usize_field(v, "vocab_size")?,
        rms_eps: if v.get("rms_norm_eps").is_some() { f32_field(v, "rms_norm_eps")? } else { 1e-6 },
        rope_theta,
        rope_scaling,
        qk_norm: matches!(arch, Arch::Qwen3 | Arch::Gemma3),
        block,
        // Gemma ties its LM head unless told otherwise.
        tie_embeddings: v.get("tie_word_embeddings").and_then(Value::as_bool).unwrap_or(gemma),
        max_position: if v.get("max_position_embeddings").is_some() {
            usize_field(v, "max_position_embeddings")?
        } else {
            4096
        },
        eos_ids,
        bos_id: ids_field(v, "bos_token_id").first().copied(),
    })
}

fn present(v: &Value, name: &str) -> bool {
    v.get(name).is_some_and(|x| !x.is_null())
}

/// The sliding windows of Mistral's, Qwen2's and Qwen3's layers, as transformers applies them:
/// Mistral's `sliding_window` on every layer (MistralConfig's default, 4096, where the file
/// leaves it out; `null`: none); Qwen's only with `use_sliding_window`, on the layers
/// `layer_types` names or else from `max_window_layers` on. Local layers keep the model's RoPE.
fn windowed_block(v: &Value, arch: Arch, layers: usize) -> Result<BlockOptions> {
    let window = |default: usize| -> Result<Option<usize>> {
        match v.get("sliding_window") {
            None => Ok(Some(default)),
            Some(Value::Null) => Ok(None),
            Some(_) => usize_field(v, "sliding_window").map(Some),
        }
    };
    let (window, local_layers) = match arch {
        Arch::Mistral => (window(4096)?, vec![true; layers]),
        Arch::Qwen2 | Arch::Qwen3 if v.get("use_sliding_window").and_then(Value::as_bool) == Some(true) => {
            let local = match v.get("layer_types").filter(|x| !x.is_null()) {
                Some(types) => layer_types(types, layers)?,
                None => {
                    let first = if present(v, "max_window_layers") { usize_field(v, "max_window_layers")? } else { 28 };
                    (0..layers).map(|i| i >= first).collect()
                }
            };
            (window(4096)?, local)
        }
        _ => (None, Vec::new()),
    };
    Ok(match window {
        Some(w) if local_layers.contains(&true) => {
            BlockOptions { sliding_window: Some(w), local_layers, ..BlockOptions::default() }
        }
        _ => BlockOptions::default(),
    })
}

/// `layer_types`: per layer, whether it is local ("sliding_attention") or global.
fn layer_types(types: &Value, layers: usize) -> Result<Vec<bool>> {
    let types = types
        .as_array()
        .filter(|t| t.len() == layers)
        .with_context(|| format!("field \"layer_types\" must list the type of each of the {layers} layers"))?;
    types
        .iter()
        .map(|t| match t.as_str() {
            Some("sliding_attention") => Ok(true),
            Some("full_attention") => Ok(false),
            _ => bail!("field \"layer_types\": {t} is not \"sliding_attention\" or \"full_attention\""),
        })
        .collect()
}

/// Gemma 3's block, with Gemma3TextConfig's defaults for what the file leaves out.
fn gemma3_block(v: &Value, layers: usize, hidden: usize) -> Result<BlockOptions> {
    for cap in ["final_logit_softcapping", "attn_logit_softcapping"] {
        if let Some(x) = v.get(cap).filter(|x| !x.is_null()) {
            bail!("field \"{cap}\" is {x}: logit softcapping is not supported");
        }
    }
    if v.get("use_bidirectional_attention").and_then(Value::as_bool) == Some(true) {
        bail!("field \"use_bidirectional_attention\" is true: only causal attention is supported");
    }
    let act = v.get("hidden_activation").or_else(|| v.get("hidden_act")).and_then(Value::as_str);
    let activation = match act.unwrap_or("gelu_pytorch_tanh") {
        "gelu_pytorch_tanh" => Activation::GeluTanh,
        other => bail!("field \"hidden_activation\" is {other:?}; gelu_pytorch_tanh is supported"),
    };
    let scalar = if present(v, "query_pre_attn_scalar") { f32_field(v, "query_pre_attn_scalar")? } else { 256.0 };
    let window = if present(v, "sliding_window") { usize_field(v, "sliding_window")? } else { 4096 };
    let local_layers = match v.get("layer_types").filter(|x| !x.is_null()) {
        Some(types) => layer_types(types, layers)?,
        // Older configs: every pattern-th layer is global.
        None => {
            let key = ["sliding_window_pattern", "_sliding_window_pattern"].into_iter().find(|k| present(v, k));
            let pattern = match key {
                Some(k) => usize_field(v, k)?,
                None => 6,
            };
            (0..layers).map(|i| (i + 1) % pattern != 0).collect()
        }
    };
    let local_rope = v.get("rope_parameters").and_then(|r| r.get("sliding_attention")).filter(|x| x.is_object());
    let local_rope_theta = match local_rope {
        Some(r) => {
            if parse_rope_scaling(r)? != RopeScaling::None {
                bail!("rope_parameters.sliding_attention: RoPE scaling of local layers is not supported");
            }
            if present(r, "rope_theta") {
                f32_field(r, "rope_theta")?
            } else {
                10000.0
            }
        }
        None if present(v, "rope_local_base_freq") => f32_field(v, "rope_local_base_freq")?,
        None => 10000.0,
    };
    Ok(BlockOptions {
        embed_scale: Some((hidden as f64).sqrt() as f32),
        norm_offset: 1.0,
        post_norms: true,
        activation,
        attn_scale: Some((1.0 / f64::from(scalar).sqrt()) as f32),
        sliding_window: Some(window),
        local_layers,
        local_rope_theta: Some(local_rope_theta),
    })
}

fn parse_rope_scaling(s: &Value) -> Result<RopeScaling> {
    let kind = match s.get("rope_type").or_else(|| s.get("type")) {
        Some(kind) => kind.as_str().with_context(|| format!("\"rope_type\" is {kind}, not a string"))?,
        // No type: plain RoPE, unless scaling fields say otherwise (transformers refuses those;
        // ignoring them would run the model with the wrong frequencies).
        None => {
            let fields = s.as_object().into_iter().flat_map(|o| o.keys()).filter(|k| *k != "rope_theta");
            let fields: Vec<&str> = fields.map(String::as_str).collect();
            anyhow::ensure!(fields.is_empty(), "no \"rope_type\" (or \"type\") beside {}", fields.join(", "));
            "default"
        }
    };
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
    /// Whether layer `i` is local (sliding-window attention, its own RoPE base).
    pub fn is_local(&self, i: usize) -> bool {
        self.block.local_layers.get(i).copied().unwrap_or(false)
    }

    /// The positions layer `i` attends to at most, its own included; `None`: all.
    pub fn layer_window(&self, i: usize) -> Option<usize> {
        self.block.sliding_window.filter(|_| self.is_local(i))
    }

    /// The inverse frequencies of local layers (their own base, no scaling), where the model
    /// has local layers.
    pub fn local_inv_freq(&self) -> Option<Vec<f32>> {
        let theta = self.block.local_rope_theta.filter(|_| self.block.local_layers.contains(&true))?;
        Some(ModelConfig { rope_theta: theta, rope_scaling: RopeScaling::None, ..self.clone() }.inv_freq())
    }

    /// RoPE inverse frequencies (of the global layers), computed in f32 as transformers does.
    pub fn inv_freq(&self) -> Vec<f32> {
        let d = self.head_dim;
        let base: Vec<f32> = (0..d / 2).map(|i| 1.0 / self.rope_theta.powf((2 * i) as f32 / d as f32)).collect();
        match self.rope_scaling {
            RopeScaling::None => base,
            RopeScaling::Linear { factor } => base.iter().map(|f| f / factor).collect(),
            RopeScaling::Divisors(ref divisors) => base.iter().zip(divisors).map(|(f, d)| f / d).collect(),
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

    /// llama.cpp's converter turns llama3 scaling into per-frequency divisors
    /// (convert_hf_to_gguf.py, LlamaModel.generate_extra_tensors: 1 for high frequencies, the
    /// factor for low ones, 1 / ((1 - smooth) / factor + smooth) between); dividing by them gives
    /// the frequencies the llama3 settings give.
    #[test]
    fn gguf_divisors_give_the_llama3_frequencies() {
        let mut c = base();
        c["rope_theta"] = json!(500000.0);
        c["rope_scaling"] = json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 256});
        let llama3 = parse_config(&c).unwrap();
        let plain = ModelConfig { rope_scaling: RopeScaling::None, ..llama3.clone() }.inv_freq();
        let divisors: Vec<f32> = plain
            .iter()
            .map(|&f| {
                let wavelen = 2.0 * std::f64::consts::PI / f as f64;
                if wavelen < 256.0 / 4.0 {
                    1.0
                } else if wavelen > 256.0 {
                    8.0
                } else {
                    let smooth = (256.0 / wavelen - 1.0) / (4.0 - 1.0);
                    (1.0 / ((1.0 - smooth) / 8.0 + smooth)) as f32
                }
            })
            .collect();
        assert!(divisors.contains(&1.0) && divisors.contains(&8.0) && divisors.iter().any(|d| *d > 1.0 && *d < 8.0));
        let from_gguf = ModelConfig { rope_scaling: RopeScaling::Divisors(divisors), ..llama3.clone() }.inv_freq();
        for (a, b) in from_gguf.iter().zip(llama3.inv_freq()) {
            assert!((a - b).abs() <= 1e-6 * b, "{a} vs {b}");
        }
    }

    #[test]
    fn qwen3_has_qk_norm_and_its_own_head_dim() {
        let mut c = base();
        c["architectures"] = json!(["Qwen3ForCausalLM"]);
        c["head_dim"] = json!(32);
        let q = parse_config(&c).unwrap();
        assert_eq!((q.arch, q.qk_norm, q.head_dim, q.hidden / q.heads), (Arch::Qwen3, true, 32, 16));
        assert!(!parse_config(&base()).unwrap().qk_norm);
    }

    #[test]
    fn mistral_and_qwen_windows_as_transformers_applies_them() {
        let windows = |patch: Value| {
            let mut v = base();
            v.as_object_mut().unwrap().extend(patch.as_object().unwrap().clone());
            let c = parse_config(&v).unwrap();
            (0..c.layers).map(|i| c.layer_window(i)).collect::<Vec<_>>()
        };
        let mistral = |w: Value| json!({"architectures": ["MistralForCausalLM"], "sliding_window": w});
        assert_eq!(windows(mistral(json!(16))), [Some(16), Some(16)]);
        assert_eq!(windows(mistral(Value::Null)), [None, None]);
        // MistralConfig's default where the file leaves the field out.
        assert_eq!(windows(json!({"architectures": ["MistralForCausalLM"]})), [Some(4096), Some(4096)]);
        let qwen = |on: bool| {
            json!({"architectures": ["Qwen2ForCausalLM"], "sliding_window": 32, "use_sliding_window": on,
                   "max_window_layers": 1})
        };
        assert_eq!(windows(qwen(false)), [None, None]);
        assert_eq!(windows(qwen(true)), [None, Some(32)]);
        let mut typed = qwen(true);
        typed["layer_types"] = json!(["sliding_attention", "full_attention"]);
        assert_eq!(windows(typed), [Some(32), None]);
        assert_eq!(windows(json!({"sliding_window": 8})), [None, None], "Llama has no window");
    }

    fn gemma3() -> Value {
        json!({"architectures": ["Gemma3ForCausalLM"], "hidden_size": 64, "num_hidden_layers": 4,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "intermediate_size": 160,
               "vocab_size": 384, "query_pre_attn_scalar": 24, "sliding_window": 16,
               "final_logit_softcapping": null, "attn_logit_softcapping": null})
    }

    /// Gemma 3 as transformers 5.x writes it (rope_parameters per layer type, layer_types) and as
    /// the hub's 4.x configs have it (rope_theta, rope_local_base_freq, rope_scaling for the
    /// global layers, sliding_window_pattern): the same model.
    #[test]
    fn gemma3_in_both_styles() {
        let mut new = gemma3();
        new["layer_types"] = json!(["sliding_attention", "full_attention", "sliding_attention", "full_attention"]);
        new["rope_parameters"] = json!({
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}});
        let mut old = gemma3();
        old["sliding_window_pattern"] = json!(2);
        old["rope_theta"] = json!(1000000.0);
        old["rope_local_base_freq"] = json!(10000.0);
        old["rope_scaling"] = json!({"rope_type": "linear", "factor": 8.0});
        let (a, b) = (parse_config(&new).unwrap(), parse_config(&old).unwrap());
        assert_eq!(a, b);
        assert_eq!((a.arch, a.qk_norm, a.tie_embeddings), (Arch::Gemma3, true, true));
        let o = &a.block;
        assert_eq!(
            (o.embed_scale, o.norm_offset, o.post_norms, o.activation),
            (Some(8.0), 1.0, true, Activation::GeluTanh)
        );
        assert_eq!(o.attn_scale, Some((1.0 / 24f64.sqrt()) as f32));
        assert_eq!((a.layer_window(0), a.layer_window(1), a.layer_window(2)), (Some(16), None, Some(16)));
        // Global layers: base 1e6 divided by the factor; local ones: base 10000, unscaled.
        let global = a.inv_freq();
        let local = a.local_inv_freq().unwrap();
        assert_eq!((global[0], local[0]), (1.0 / 8.0, 1.0));
        assert!((global[1] - 1e6f32.powf(-2.0 / 32.0) / 8.0).abs() < 1e-9);
        assert!((local[1] - 1e4f32.powf(-2.0 / 32.0)).abs() < 1e-9);
        assert_eq!(parse_config(&base()).unwrap().local_inv_freq(), None);
    }

    #[test]
    fn gemma3_refuses_what_it_cannot_run() {
        for (field, value) in [
            ("final_logit_softcapping", json!(30.0)),
            ("attn_logit_softcapping", json!(50.0)),
            ("hidden_activation", json!("relu")),
            ("layer_types", json!(["sliding_attention"])),
        ] {
            let mut c = gemma3();
            c[field] = value;
            let msg = format!("{:#}", parse_config(&c).unwrap_err());
            assert!(msg.contains(field), "{field}: {msg}");
        }
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
        c["rope_scaling"] = json!({"factor": 8.0});
        let err = format!("{:#}", parse_config(&c).unwrap_err());
        assert!(err.contains("rope_scaling") && err.contains("no \"rope_type\" (or \"type\") beside factor"), "{err}");
        let mut c = base();
        c["rope_parameters"] = json!({"rope_theta": 1000.0});
        assert_eq!(parse_config(&c).unwrap().rope_scaling, RopeScaling::None);
        let mut c = base();
        c["head_dim"] = json!(1 << 23);
        assert!(format!("{:#}", parse_config(&c).unwrap_err()).contains("head_dim 8388608 is over"));
        let mut c = base();
        c["hidden_size"] = json!("big");
        assert!(format!("{:#}", parse_config(&c).unwrap_err()).contains("hidden_size"));
    }
}
