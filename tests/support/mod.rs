//! Shared by the test files that compare the engine with transformers' goldens.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use serde_json::Value;
use wginfer::engine::{Engine, Request};
use wginfer::sampling::SamplingParams;
use wginfer::sched::{Priority, SeqRequest};
use wginfer::tokenizer::Message;

/// A file or folder of tests/fixtures: under the package root cargo runs the tests from, else
/// under the current directory (a test binary carried to another machine, run from a checkout).
pub fn fixture(name: &str) -> PathBuf {
    let root = std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    root.join("tests/fixtures").join(name)
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// Chat messages from a golden's `[{"role", "content"}]`.
pub fn messages(v: &Value) -> Vec<Message> {
    let text = |m: &Value, key: &str| m[key].as_str().unwrap().to_string();
    v.as_array().unwrap().iter().map(|m| Message::new(&text(m, "role"), &text(m, "content"))).collect()
}

/// golden.json of a fixture folder.
pub fn golden(name: &str) -> Value {
    read_json(&fixture(name).join("golden.json"))
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Largest final-position logit error allowed against transformers on `engine`'s adapter. The
/// engine computes in f32 from the stored weights, as the goldens do, so on lavapipe every
/// fixture (f32, bf16, f16 and quantized GGUF), through Vulkan with and without f16/subgroups
/// and through GL, lands at 4e-5 to 6e-5 (worst 5.5e-5, qwen2-bf16, 300 tokens): 2e-4 keeps a
/// margin of 3.6x; so does SwiftShader in Chromium (tests/browser.rs), a CPU adapter too.
/// Hardware adapters need more: on the H200 the tensor-core prefill rounds its activations
/// and weights to f16 (2^-11 relative each), worst 1.9e-2 (f16/bf16 fixtures; f32 weights,
/// which never take tensor cores, 4e-5 to 6.5e-5 since RoPE computes its own sin/cos), so
/// 5e-2 keeps a margin of 2.5x (docs/PERF.md, "Kernel and golden tests on the H200").
pub fn logit_tolerance(engine: &Engine) -> f32 {
    match engine.gpu.info.device_type {
        wgpu::DeviceType::Cpu => 2e-4,
        _ => 5e-2,
    }
}

/// Every case of `golden` with a prompt of at most `max_prompt` tokens: final-position logits
/// within `tol` (of the same length) and the 16 greedy ids identical.
#[cfg(not(target_arch = "wasm32"))]
pub fn check_cases(engine: &mut Engine, golden: &Value, tol: f32, max_prompt: usize, label: &str) {
    pollster::block_on(check_cases_async(engine, golden, tol, max_prompt, label));
}

/// `check_cases` as a future: the browser's tests await it.
pub async fn check_cases_async(engine: &mut Engine, golden: &Value, tol: f32, max_prompt: usize, label: &str) {
    for case in golden["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        if prompt.len() > max_prompt {
            continue;
        }
        let want: Vec<f32> = case["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        engine.reset();
        let logits = engine.prompt_logits_async(&prompt).await.unwrap();
        assert_eq!(logits.len(), want.len(), "{label}: prompt of {} tokens: logits of the wrong length", prompt.len());
        let worst = logits.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        log(&format!(
            "{label}: prompt of {} tokens: worst logit error {worst:.2e} (tolerance {tol:.0e})",
            prompt.len()
        ));
        assert!(
            worst <= tol,
            "{label}: prompt of {} tokens: logits differ by up to {worst} (tolerance {tol})",
            prompt.len()
        );
        let req = Request {
            prompt_ids: prompt.clone(),
            max_tokens: 16,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        let got = engine.generate_observed_async(&req, |_, _| true).await.unwrap().ids;
        assert_eq!(got, ids(&case["greedy_ids"]), "{label}: greedy ids for a prompt of {} tokens", prompt.len());
    }
}

/// A line of a test's progress: stderr natively, the browser's console in a page (the test
/// runner prints it).
pub fn log(line: &str) {
    #[cfg(not(target_arch = "wasm32"))]
    eprintln!("{line}");
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_test::console_log!("{line}");
}

/// A greedy interactive batcher request that does not stop at EOS.
pub fn seq_request(id: u64, prompt: &[u32], max_tokens: usize) -> SeqRequest {
    SeqRequest {
        id,
        prompt_ids: prompt.to_vec(),
        max_tokens,
        sampling: SamplingParams::default(),
        stop_at_eos: false,
        priority: Priority::Interactive,
        logprobs: None,
    }
}

/// Ends the test process with a message if the returned guard is not dropped within `limit`:
/// for code whose failure would be a hang (an endless loop inside one call).
pub fn watchdog(limit: std::time::Duration, what: &'static str) -> std::sync::mpsc::Sender<()> {
    let (guard, dropped) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = dropped.recv_timeout(limit) {
            eprintln!("{what}: still running after {limit:?}");
            std::process::exit(101);
        }
    });
    guard
}
