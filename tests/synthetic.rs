//! Synthetic (random-weight) models load and run with every weight type the presets use.

use wginfer::engine::{Engine, Request};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::model::config::ModelConfig;
use wginfer::model::forward::{Forward, ForwardOptions};
use wginfer::model::loader::load_weights;
use wginfer::model::synthetic::{preset, Synthetic};
use wginfer::model::tensor::DType;
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

#[test]
fn every_weight_type_runs() {
    for dtype in [DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q4_K, DType::Q6_K] {
        let cfg = small();
        let gpu = Gpu::new(&GpuOptions::default()).unwrap();
        let weights = load_weights(&gpu, &cfg, &Synthetic::new(&cfg, dtype).unwrap()).unwrap();
        let fwd = Forward::new(&gpu, cfg, weights, &ForwardOptions { context: 64, ..Default::default() }).unwrap();
        let mut e = Engine::new(gpu, fwd, None, "synthetic".as_ref());
        let req = Request {
            prompt_ids: vec![1, 2, 3, 4, 5],
            max_tokens: 3,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        assert_eq!(e.generate(&req, |_| true).unwrap().ids.len(), 3, "{dtype:?}");
    }
}
