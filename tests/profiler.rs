//! The timestamp profiler attributes GPU time to every layer and kernel of a real step.

use std::path::Path;

use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::gpu::profiler::{by_kernel, by_layer, Part};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;

#[test]
fn decode_step_is_timed_per_layer_and_kernel() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/qwen2-f32");
    let opts = EngineOptions { forward: ForwardOptions { profile: true, ..Default::default() }, ..Default::default() };
    let mut e = Engine::load(&dir, &opts).unwrap();
    if !e.gpu.caps.timestamp_in_pass {
        assert!(!e.forward.profiling());
        return;
    }
    let req =
        Request { prompt_ids: vec![5, 6, 7], max_tokens: 3, sampling: SamplingParams::default(), stop_at_eos: false };
    e.generate(&req, |_| true).unwrap();
    let t = &e.forward.timings;
    let layers = e.forward.cfg.layers;
    // embedding + 5 per layer + final norm, LM head, argmax
    assert_eq!(t.len(), 1 + 5 * layers + 3);
    assert!(t.iter().all(|x| x.ns >= 0.0));
    assert!(t.iter().map(|x| x.ns).sum::<f64>() > 0.0, "timestamps advanced");
    let kernels: Vec<&str> = by_kernel(t).iter().map(|k| k.kernel).collect();
    assert_eq!(kernels, ["embedding", "qkv_rope", "attention_plain", "matmul", "swiglu", "rmsnorm", "argmax"]);
    let (per_layer, _) = by_layer(t);
    assert_eq!(per_layer.len(), layers);
    assert_eq!(t.iter().filter(|x| x.span.part == Part::Attention).count(), 3 * layers);
}
