//! Synthetic (random-weight) models load and run with every weight type the presets use, and
//! compute what a CPU forward pass from the dequantized weights computes.

use std::collections::HashMap;

use wginfer::engine::{Engine, Request};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::kv::KvOptions;
use wginfer::model::config::ModelConfig;
use wginfer::model::forward::{Forward, ForwardOptions};
use wginfer::model::loader::load_weights;
use wginfer::model::synthetic::{preset, Synthetic};
use wginfer::model::tensor::{DType, TensorSource};
use wginfer::ops::WeightType;
use wginfer::sampling::SamplingParams;

/// The Qwen2.5-0.5B preset, shrunk to a test's size but with its structure (bias, tied head).
fn small() -> ModelConfig {
    ModelConfig {
        hidden: 256,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        intermediate: 512,
        vocab: 512,
        ..preset("qwen2.5-0.5b").unwrap()
    }
}

#[test]
fn presets_name_real_shapes() {
    let q = preset("qwen2.5-0.5b").unwrap();
    assert_eq!((q.hidden, q.layers, q.heads, q.kv_heads, q.intermediate, q.vocab), (896, 24, 14, 2, 4864, 151936));
    let l = preset("llama-3.2-1b").unwrap();
    assert_eq!((l.hidden, l.layers, l.heads, l.kv_heads, l.intermediate, l.vocab), (2048, 16, 32, 8, 8192, 128256));
    assert!(preset("gpt-2").is_err());
}

/// The model as llama2.c's `forward` (run.c) computes it, one token at a time, in f64 from the
/// weights as the source holds them: Hugging Face row order (no pair-adjacent q/k rows, no
/// gate/up interleaving) and transformers' rotate-half RoPE (dimension i pairs with i + d/2).
/// Quantized weights go through `quant::dequantize`, which tests/quant.rs checks against ggml.
struct Reference {
    cfg: ModelConfig,
    weights: HashMap<String, Vec<f32>>,
    /// Per layer, the key (rotated) and the value of every position so far.
    keys: Vec<Vec<Vec<f64>>>,
    values: Vec<Vec<Vec<f64>>>,
}

fn dot(w: &[f32], x: &[f64]) -> f64 {
    w.iter().zip(x).map(|(a, b)| f64::from(*a) * b).sum()
}

fn add(x: &mut [f64], y: &[f64]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}

impl Reference {
    fn new(cfg: &ModelConfig, src: &Synthetic) -> Reference {
        let mut names = vec!["model.embed_tokens.weight".to_string(), "model.norm.weight".to_string()];
        for i in 0..cfg.layers {
            for t in [
                "input_layernorm.weight",
                "post_attention_layernorm.weight",
                "self_attn.q_proj.weight",
                "self_attn.q_proj.bias",
                "self_attn.k_proj.weight",
                "self_attn.k_proj.bias",
                "self_attn.v_proj.weight",
                "self_attn.v_proj.bias",
                "self_attn.o_proj.weight",
                "mlp.gate_proj.weight",
                "mlp.up_proj.weight",
                "mlp.down_proj.weight",
            ] {
                names.push(format!("model.layers.{i}.{t}"));
            }
        }
        let weights = names
            .into_iter()
            .map(|n| {
                let values = src.tensor(&n).unwrap().unwrap_or_else(|| panic!("no tensor {n}")).to_f32();
                (n, values)
            })
            .collect();
        Reference {
            cfg: cfg.clone(),
            weights,
            keys: vec![Vec::new(); cfg.layers],
            values: vec![Vec::new(); cfg.layers],
        }
    }

    /// W·x + bias of the projection `name` (`name.weight` is [rows, x.len()]).
    fn linear(&self, name: &str, x: &[f64]) -> Vec<f64> {
        let w = &self.weights[&format!("{name}.weight")];
        let mut y: Vec<f64> = w.chunks_exact(x.len()).map(|row| dot(row, x)).collect();
        if let Some(b) = self.weights.get(&format!("{name}.bias")) {
            y.iter_mut().zip(b).for_each(|(y, b)| *y += f64::from(*b));
        }
        y
    }

    fn rmsnorm(&self, x: &[f64], name: &str) -> Vec<f64> {
        let mean_square = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (mean_square + f64::from(self.cfg.rms_eps)).sqrt();
        x.iter().zip(&self.weights[name]).map(|(v, w)| v * inv * f64::from(*w)).collect()
    }

    fn rope(&self, v: &mut [f64], pos: usize) {
        let d = self.cfg.head_dim;
        for head in v.chunks_exact_mut(d) {
            for i in 0..d / 2 {
                let angle = pos as f64 / f64::from(self.cfg.rope_theta).powf((2 * i) as f64 / d as f64);
                let (cos, sin) = (angle.cos(), angle.sin());
                let (a, b) = (head[i], head[i + d / 2]);
                head[i] = a * cos - b * sin;
                head[i + d / 2] = b * cos + a * sin;
            }
        }
    }

    /// Logits after `token` at the next position.
    fn step(&mut self, token: u32) -> Vec<f64> {
        let (d, hd) = (self.cfg.hidden, self.cfg.head_dim);
        let group = self.cfg.heads / self.cfg.kv_heads;
        let pos = self.keys[0].len();
        let embed = &self.weights["model.embed_tokens.weight"][token as usize * d..][..d];
        let mut x: Vec<f64> = embed.iter().map(|&v| f64::from(v)).collect();
        for l in 0..self.cfg.layers {
            let p = format!("model.layers.{l}");
            let xn = self.rmsnorm(&x, &format!("{p}.input_layernorm.weight"));
            let mut q = self.linear(&format!("{p}.self_attn.q_proj"), &xn);
            let mut k = self.linear(&format!("{p}.self_attn.k_proj"), &xn);
            let v = self.linear(&format!("{p}.self_attn.v_proj"), &xn);
            self.rope(&mut q, pos);
            self.rope(&mut k, pos);
            self.keys[l].push(k);
            self.values[l].push(v);
            let (keys, values) = (&self.keys[l], &self.values[l]);
            let mut att = vec![0.0; q.len()];
            for (h, (qh, out)) in q.chunks_exact(hd).zip(att.chunks_exact_mut(hd)).enumerate() {
                let kv = (h / group) * hd..(h / group + 1) * hd;
                let scores: Vec<f64> = keys
                    .iter()
                    .map(|k| qh.iter().zip(&k[kv.clone()]).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt())
                    .collect();
                let max = scores.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - max).exp()).collect();
                let total: f64 = e.iter().sum();
                for (e, value) in e.iter().zip(values) {
                    out.iter_mut().zip(&value[kv.clone()]).for_each(|(o, v)| *o += e / total * v);
                }
            }
            add(&mut x, &self.linear(&format!("{p}.self_attn.o_proj"), &att));
            let xn = self.rmsnorm(&x, &format!("{p}.post_attention_layernorm.weight"));
            let gate = self.linear(&format!("{p}.mlp.gate_proj"), &xn);
            let up = self.linear(&format!("{p}.mlp.up_proj"), &xn);
            let h: Vec<f64> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
            add(&mut x, &self.linear(&format!("{p}.mlp.down_proj"), &h));
        }
        let xn = self.rmsnorm(&x, "model.norm.weight");
        // The preset ties the LM head to the embedding.
        self.linear("model.embed_tokens", &xn)
    }
}

/// (index of the largest value, its lead over the second largest).
fn top2(v: &[f64]) -> (u32, f64) {
    let best = (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b });
    let second = v.iter().enumerate().filter(|(i, _)| *i != best).map(|(_, x)| *x).fold(f64::NEG_INFINITY, f64::max);
    (best as u32, v[best] - second)
}

/// Largest logit error allowed, relative to the largest |logit| of the reference. The engine
/// runs without tensor cores here (`no_coop_matrix`: their f16 products are the kernel tests'
/// business), so every adapter computes in f32; on lavapipe the worst measured is 1.4e-6 (Q8_0;
/// 1e-7 to 1e-6 for the other types), and 1e-5 keeps a 7x margin.
const TOLERANCE: f64 = 1e-5;

/// Prompt logits within the tolerance of the reference, and greedy ids equal to the reference's
/// as long as its top-2 lead is larger than twice the tolerance (no rounding can flip it).
#[test]
fn every_weight_type_matches_a_cpu_reference() {
    let cfg = small();
    let prompt = [1u32, 7, 42, 300, 5, 99, 260, 17];
    let steps = 8;
    for dtype in WeightType::ALL.into_iter().filter(|&t| t != WeightType::F32).map(DType::stored_as) {
        let src = Synthetic::new(&cfg, dtype).unwrap();
        let mut reference = Reference::new(&cfg, &src);
        let mut want = Vec::new();
        for &t in &prompt {
            want = reference.step(t);
        }
        let gpu = Gpu::new(&GpuOptions { no_coop_matrix: true, ..Default::default() }).unwrap();
        let tol = TOLERANCE * want.iter().map(|v| v.abs()).fold(0.0, f64::max);
        let weights = load_weights(&gpu, &cfg, &src).unwrap();
        let fwd = Forward::new(
            &gpu,
            cfg.clone(),
            weights,
            &ForwardOptions { kv: KvOptions { context: 64, ..Default::default() }, ..Default::default() },
        )
        .unwrap();
        let mut e = Engine::new(gpu, fwd, None, "synthetic".as_ref());

        let got = e.prompt_logits(&prompt).unwrap();
        assert_eq!(got.len(), cfg.vocab, "{dtype:?}");
        let worst = got.iter().zip(&want).map(|(a, b)| (f64::from(*a) - b).abs()).fold(0.0, f64::max);
        assert!(worst <= tol, "{dtype:?}: logits differ by up to {worst} (tolerance {tol})");

        e.reset();
        let req = Request {
            prompt_ids: prompt.to_vec(),
            max_tokens: steps,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        let ids = e.generate(&req, |_| true).unwrap().ids;
        let mut checked = 0;
        for &id in &ids {
            let (best, lead) = top2(&want);
            if lead <= 2.0 * tol {
                break; // a near tie: either id is right, and what follows depends on it
            }
            assert_eq!(id, best, "{dtype:?}: greedy id {checked} (the reference leads by {lead})");
            checked += 1;
            want = reference.step(id);
        }
        // These weights give clear leads; a near tie this early would leave too little checked.
        assert!(checked >= steps / 2, "{dtype:?}: only {checked} greedy ids checked");
    }
}
