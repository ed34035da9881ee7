//! The engine against transformers: greedy ids and final-position logits of the tiny fixture
//! models (scripts/make_fixtures.py) for prompts of 1 to 1500 tokens, which cross the
//! attention kernels' switch at 1024.

use std::path::{Path, PathBuf};

use serde_json::Value;
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::sampling::SamplingParams;

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn golden(name: &str) -> Value {
    let text = std::fs::read_to_string(fixture(name).join("golden.json")).expect("golden.json");
    serde_json::from_str(&text).unwrap()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_model(name: &str, tol: f32) {
    let g = golden(name);
    let mut engine = Engine::load(&fixture(name), &EngineOptions::default()).unwrap();
    for case in g["cases"].as_array().unwrap() {
        let prompt = ids(&case["prompt_ids"]);
        let want_logits: Vec<f32> = case["logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        engine.reset();
        let logits = engine.prompt_logits(&prompt).unwrap();
        let worst = logits
            .iter()
            .zip(&want_logits)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst <= tol,
            "{name}: prompt of {} tokens: logits differ by up to {worst} (tolerance {tol})",
            prompt.len()
        );
        let req = Request {
            prompt_ids: prompt.clone(),
            max_tokens: 16,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        let got = engine.generate(&req, |_| true).unwrap().ids;
        assert_eq!(
            got,
            ids(&case["greedy_ids"]),
            "{name}: greedy ids for a prompt of {} tokens",
            prompt.len()
        );
    }
}

#[test]
fn llama_f32_matches_transformers() {
    check_model("llama-f32", 1e-3);
}

#[test]
fn qwen2_f32_matches_transformers() {
    check_model("qwen2-f32", 1e-3);
}

#[test]
fn qwen2_bf16_matches_transformers() {
    check_model("qwen2-bf16", 2e-2);
}

#[test]
fn mistral_f16_matches_transformers() {
    check_model("mistral-f16", 2e-2);
}

#[test]
fn flash_attention_for_every_context_matches_too() {
    // Threshold 1: every prompt but the 1-token one runs the flash kernel.
    let name = "llama-f32";
    let g = golden(name);
    let opts = EngineOptions {
        forward: wginfer::model::forward::ForwardOptions {
            attn_threshold: 1,
            ..Default::default()
        },
        ..Default::default()
    };
    let mut engine = Engine::load(&fixture(name), &opts).unwrap();
    for case in g["cases"].as_array().unwrap() {
        engine.reset();
        let req = Request {
            prompt_ids: ids(&case["prompt_ids"]),
            max_tokens: 16,
            sampling: SamplingParams::default(),
            stop_at_eos: false,
        };
        assert_eq!(
            engine.generate(&req, |_| true).unwrap().ids,
            ids(&case["greedy_ids"])
        );
    }
}

#[test]
fn tokenizer_and_chat_template_match_transformers() {
    for name in ["llama-f32", "qwen2-f32", "qwen2-bf16", "mistral-f16"] {
        let g = golden(name);
        let tok = wginfer::tokenizer::TextTokenizer::from_hf_dir(&fixture(name)).unwrap();
        for case in g["encode"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            assert_eq!(
                tok.encode(text, false).unwrap(),
                ids(&case["ids"]),
                "{name}: {text:?}"
            );
        }
        let chat = &g["chat"];
        let msgs: Vec<wginfer::tokenizer::Message> = chat["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                wginfer::tokenizer::Message::new(
                    m["role"].as_str().unwrap(),
                    m["content"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            tok.render_chat(&msgs).unwrap(),
            chat["text"].as_str().unwrap(),
            "{name}: chat text"
        );
        assert_eq!(
            tok.encode_chat(&msgs).unwrap(),
            ids(&chat["ids"]),
            "{name}: chat ids"
        );
    }
}

/// The acceptance check as a user runs it: the CLI's JSON ids equal transformers' for the
/// longest prompt.
#[test]
fn cli_json_reproduces_greedy_ids_for_1500_tokens() {
    let name = "qwen2-bf16";
    let case = golden(name)["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["prompt_len"] == 1500)
        .unwrap()
        .clone();
    let prompt: Vec<String> = ids(&case["prompt_ids"])
        .iter()
        .map(u32::to_string)
        .collect();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_wginfer"))
        .args([
            "generate",
            "--model",
            fixture(name).to_str().unwrap(),
            "--max-tokens",
            "16",
            "--temperature",
            "0",
            "--json",
            "--prompt-ids",
            &prompt.join(","),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object on stdout");
    assert_eq!(ids(&v["ids"]), ids(&case["greedy_ids"]));
    assert_eq!(ids(&v["prompt_ids"]).len(), 1500);
    for key in ["text", "ttft_ms", "prefill_tok_s", "decode_tok_s"] {
        assert!(v.get(key).is_some(), "{key}");
    }
}
