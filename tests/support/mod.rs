//! Shared by the test files that compare the engine with transformers' goldens.
#![allow(dead_code)] // each test binary uses a different subset

use std::path::{Path, PathBuf};

use serde_json::Value;
use wginfer::engine::{Engine, Request};
use wginfer::sampling::SamplingParams;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

pub fn read_json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

/// golden.json of a fixture folder.
pub fn golden(name: &str) -> Value {
    read_json(&fixture(name).join("golden.json"))
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Every case of `golden` with a prompt of at most `max_prompt` tokens: final-position logits
/// within `tol` and the 16 greedy ids identical.
pub fn check_cases(engine: &mut Engine, golden: &Value, tol: f32, max_prompt: usize, label: &str) {
    for case in golden["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        if prompt.len() > max_prompt {
            continue;
        }
        let want: Vec<f32> = case["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        engine.reset();
        let logits = engine.prompt_logits(&prompt).unwrap();
        let worst = logits.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
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
        let got = engine.generate(&req, |_| true).unwrap().ids;
        assert_eq!(got, ids(&case["greedy_ids"]), "{label}: greedy ids for a prompt of {} tokens", prompt.len());
    }
}
