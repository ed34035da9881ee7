//! Memory is allocated at load: decoding creates no buffers, and the KV ring behaves.

use std::path::Path;

use wginfer::engine::{Engine, EngineOptions, Finish, Request};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;

fn engine(context: u32, sliding_window: bool) -> Engine {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-f32");
    let opts = EngineOptions {
        forward: ForwardOptions { context, sliding_window, ..Default::default() },
        ..Default::default()
    };
    Engine::load(&dir, &opts).unwrap()
}

fn request(prompt_len: usize, max_tokens: usize, sampling: SamplingParams) -> Request {
    Request {
        prompt_ids: (0..prompt_len as u32).map(|i| 3 + i % 300).collect(),
        max_tokens,
        sampling,
        stop_at_eos: false,
    }
}

#[test]
fn decoding_200_steps_creates_no_buffers() {
    let mut e = engine(512, false);
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
    let mut e = engine(40, false);
    let g = e.generate(&request(30, 100, SamplingParams::default()), |_| true).unwrap();
    assert_eq!(g.finish, Finish::ContextFull);
    assert_eq!(g.ids.len(), 11); // positions 30..=39 are filled by 10 steps; the 11th id has no room
}

#[test]
fn sliding_window_keeps_generating_and_agrees_until_the_ring_wraps() {
    let fixed = engine(40, false).generate(&request(30, 100, SamplingParams::default()), |_| true).unwrap();
    let sliding = engine(40, true).generate(&request(30, 100, SamplingParams::default()), |_| true).unwrap();
    assert_eq!(sliding.finish, Finish::Length);
    assert_eq!(sliding.ids.len(), 100);
    assert_eq!(sliding.ids[..fixed.ids.len()], fixed.ids[..]);
}
