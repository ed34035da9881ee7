//! The timestamp profiler attributes GPU time to every layer and kernel of a real step.

mod support;

use std::time::Instant;

use support::fixture;
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::gpu::profiler::{by_kernel, by_layer, Part, Timing};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;

fn sum<'a>(t: impl IntoIterator<Item = &'a Timing>) -> f64 {
    t.into_iter().map(|x| x.ns).sum()
}

fn assert_near(got: f64, want: f64, what: &str) {
    assert!((got - want).abs() <= 1e-9 * want, "{what}: {got} ns, want {want} ns");
}

#[test]
fn decode_step_is_timed_per_layer_and_kernel() {
    let opts = EngineOptions { forward: ForwardOptions { profile: true, ..Default::default() }, ..Default::default() };
    let mut e = Engine::load(&fixture("qwen2-f32"), &opts).unwrap();
    // lavapipe has in-pass timestamps, so CI runs the whole test.
    if !e.gpu.caps.timestamp_in_pass {
        assert!(!e.forward.profiling());
        return;
    }
    // A 3-token prompt, then one decode step: the last step timed (profiling runs one step at
    // a time).
    let req =
        Request { prompt_ids: vec![5, 6, 7], max_tokens: 2, sampling: SamplingParams::default(), stop_at_eos: false };
    let start = Instant::now();
    e.generate(&req, |_| true).unwrap();
    let wall_ns = start.elapsed().as_nanos() as f64;
    let t = &e.forward.timings;
    let layers = e.forward.cfg.layers;

    // The dispatches of a decode step: embedding, 5 per layer (qkv_rope, attention, o and down
    // matmuls, swiglu), final norm, LM head matmul, argmax.
    let calls: Vec<(&str, usize)> = by_kernel(t).iter().map(|k| (k.kernel, k.calls)).collect();
    let want = [
        ("embedding", 1),
        ("qkv_rope", layers),
        ("attention_plain", layers),
        ("matmul", 2 * layers + 1),
        ("swiglu", layers),
        ("rmsnorm", 1),
        ("argmax", 1),
    ];
    assert_eq!(calls, want);
    for l in 0..layers {
        let parts: Vec<Part> = t.iter().filter(|x| x.span.layer == Some(l)).map(|x| x.span.part).collect();
        assert_eq!(parts, [[Part::Attention; 3].as_slice(), &[Part::Mlp; 2]].concat(), "layer {l}");
    }

    // Every dispatch takes time (a timestamp earlier than the one before it would read 0), and
    // the GPU cannot have spent more than the generation's wall time.
    assert!(t.iter().all(|x| x.ns > 0.0), "{t:?}");
    let total = sum(t);
    assert!(total <= wall_ns, "GPU time {total} ns in a generation of {wall_ns} ns");

    // The breakdowns add up to the dispatches they attribute.
    for k in by_kernel(t) {
        assert_near(k.total_ns, sum(t.iter().filter(|x| x.span.kernel == k.kernel)), k.kernel);
    }
    assert_near(by_kernel(t).iter().map(|k| k.total_ns).sum(), total, "kernel totals");
    let (per_layer, other) = by_layer(t);
    assert_eq!(per_layer.len(), layers);
    for (l, lt) in per_layer.iter().enumerate() {
        let of = |part: Part| sum(t.iter().filter(|x| x.span.layer == Some(l) && x.span.part == part));
        assert_near(lt.attention_ns, of(Part::Attention), "attention");
        assert_near(lt.mlp_ns, of(Part::Mlp), "mlp");
    }
    assert_near(other, sum(t.iter().filter(|x| x.span.layer.is_none())), "outside the layers");
}
