//! Memory is allocated at load: decoding creates no buffers, and the KV ring behaves.

mod support;

use serde_json::Value;
use wginfer::engine::{Engine, EngineOptions, Finish, Generation, Request};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::kv::{KvCache, KvLayout, KvOptions, KvType};
use wginfer::model::forward::ForwardOptions;
use wginfer::ops::attention::{split_for, AttnKind};
use wginfer::sampling::SamplingParams;

fn engine(forward: ForwardOptions) -> Engine {
    let opts = EngineOptions { forward, ..Default::default() };
    Engine::load(&support::fixture("llama-f32"), &opts).unwrap()
}

fn ring(context: u32, sliding_window: bool) -> Engine {
    engine(ForwardOptions { kv: KvOptions { context, sliding_window, ..Default::default() }, ..Default::default() })
}

fn request(prompt_len: usize, max_tokens: usize, sampling: SamplingParams) -> Request {
    Request {
        prompt_ids: (0..prompt_len as u32).map(|i| 3 + i % 300).collect(),
        max_tokens,
        sampling,
        stop_at_eos: false,
    }
}

/// A case of window.json (scripts/make_window_goldens.py: transformers greedy ids, each token
/// attending to the last `slots` positions, or to all of them, RoPE at absolute positions).
fn window_case(name: &str) -> Value {
    support::read_json(&support::fixture("llama-f32").join("window.json"))[name].clone()
}

/// Greedy generation of the case's prompt and id count, and the attention kernel of the latest
/// submitted step as each id arrived (pipelining may have queued the next step already).
fn generate_case(e: &mut Engine, case: &Value) -> (Generation, Vec<u32>, Vec<AttnKind>) {
    let want = support::ids(&case["greedy_ids"]);
    let req = Request {
        prompt_ids: support::ids(&case["prompt_ids"]),
        max_tokens: want.len(),
        sampling: SamplingParams::default(),
        stop_at_eos: false,
    };
    let mut kinds = Vec::new();
    let g = e
        .generate_observed(&req, |_, f| {
            kinds.push(f.last_attention);
            true
        })
        .unwrap();
    (g, want, kinds)
}

#[test]
fn decoding_200_steps_creates_no_buffers() {
    let mut e = ring(512, false);
    for sampling in [
        SamplingParams::default(),
        SamplingParams { temperature: 0.8, top_k: 20, top_p: 0.9, seed: 1, ..Default::default() },
    ] {
        e.reset();
        e.generate(&request(5, 1, sampling.clone()), |_| true).unwrap();
        let before = e.gpu.buffers_created();
        let g = e.generate(&request(6, 200, sampling), |_| true).unwrap();
        assert_eq!(g.ids.len(), 200);
        assert_eq!(e.gpu.buffers_created(), before, "buffers created while decoding");
    }
}

#[test]
fn full_context_stops_without_sliding_window() {
    let mut e = ring(40, false);
    let g = e.generate(&request(30, 100, SamplingParams::default()), |_| true).unwrap();
    assert_eq!(g.finish, Finish::ContextFull);
    assert_eq!(g.ids.len(), 11); // positions 30..=39 are filled by 10 steps; the 11th id has no room
}

/// The kernels a prompt's many rows may take instead of the plain or flash one.
fn prompt_kernel(k: AttnKind) -> bool {
    matches!(k, AttnKind::Coop | AttnKind::Grouped)
}

/// The kernel of a decode row past the threshold on this engine's adapter.
fn long_decode_kernel(e: &Engine) -> AttnKind {
    match split_for(&e.gpu.caps) {
        true => AttnKind::Split,
        false => AttnKind::Flash,
    }
}

#[test]
fn sliding_window_keeps_generating_and_matches_the_reference_across_wraps() {
    // A 30-token prompt and 100 ids in a 40-slot ring: positions up to 129, three wraps.
    let case = window_case("sliding_window");
    let slots = case["slots"].as_u64().unwrap() as u32;
    // The plain kernel throughout, then the flash (or split) kernel reading the wrapped ring.
    for attn_threshold in [None, Some(20)] {
        let mut e = engine(ForwardOptions {
            kv: KvOptions { context: slots, sliding_window: true, ..Default::default() },
            attn_threshold,
            ..Default::default()
        });
        let kernel = if attn_threshold.is_some() { long_decode_kernel(&e) } else { AttnKind::Plain };
        let (g, want, kinds) = generate_case(&mut e, &case);
        assert_eq!(g.finish, Finish::Length);
        assert_eq!(g.ids, want, "{kernel:?}: sliding-window greedy ids");
        // The prompt's step may run on another kernel (tensor cores, grouped heads, or flash
        // for its many rows); every decode step after it on this one.
        assert!(kinds[1..].iter().all(|&k| k == kernel), "{kernel:?} expected, steps used {kinds:?}");
    }
}

/// A 40-slot sliding-window ring, a 30-token prompt, a generation stopped at its 11th token:
/// the step queued behind that token (position 40) wrote slot 0, position 0's, before it was
/// taken back. A next prompt sharing the first tokens must not reuse the cache (it did, and
/// attended to the overwritten slot): its logits are those of a fresh engine.
#[test]
fn a_step_taken_back_at_the_ring_s_end_is_not_reused() {
    let mut e = ring(40, true);
    let req = request(30, 20, SamplingParams::default());
    let mut n = 0;
    let g = e
        .generate(&req, |_| {
            n += 1;
            n < 11
        })
        .unwrap();
    assert_eq!((g.finish, g.ids.len()), (Finish::Stopped, 11));
    let next: Vec<u32> = req.prompt_ids[..5].iter().copied().chain([7, 8, 9]).collect();
    let got = e.prompt_logits(&next).unwrap();
    let want = ring(40, true).prompt_logits(&next).unwrap();
    assert_eq!(got, want);
}

#[test]
fn decode_crossing_the_attention_threshold_matches_the_reference() {
    // Contexts of 248..=271 positions around a threshold of 256: decode starts on the plain
    // kernel and moves to the flash kernel, whose decode steps split over 5 workgroups per head
    // (tiles of 64 positions; 3 of 128 without subgroups), or on CPU adapters the split kernel.
    let case = window_case("threshold_crossing");
    let attn_threshold = Some(case["attn_threshold"].as_u64().unwrap() as u32);
    let mut e = engine(ForwardOptions { attn_threshold, ..Default::default() });
    let (g, want, kinds) = generate_case(&mut e, &case);
    assert_eq!(g.ids, want, "greedy ids across the threshold");
    // The prompt's step may run on tensor cores or grouped heads; one decode row does not.
    let scalar: Vec<AttnKind> = kinds.iter().copied().filter(|&k| !prompt_kernel(k)).collect();
    assert_eq!(scalar.first(), Some(&AttnKind::Plain));
    assert_eq!(scalar.last(), Some(&long_decode_kernel(&e)));
}

#[test]
fn f16_values_fit_twice_the_blocks_in_the_same_memory() {
    let gpu = Gpu::new(&GpuOptions::default()).unwrap();
    let opts = KvOptions { layout: KvLayout::Paged, memory: Some(8 << 20), ..Default::default() };
    let f32_pool = KvCache::new(&gpu, 4, 128, opts).unwrap();
    let f16_pool = KvCache::new(&gpu, 4, 128, KvOptions { dtype: KvType::F16, ..opts }).unwrap();
    // 8 MiB over 4 layers of K and V, 16 positions of 128 values a block: 128 blocks of f32.
    assert_eq!((f32_pool.n_blocks, f16_pool.n_blocks), (128, 256));
    assert_eq!(f16_pool.layers[0].0.size(), f32_pool.layers[0].0.size());
}
