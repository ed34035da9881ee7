//! The engine against transformers: greedy ids and final-position logits of the tiny fixture
//! models (scripts/make_fixtures.py) for prompts of 1 to 1500 tokens, which cross the
//! attention kernels' switch at 1024.

mod support;

use serde_json::Value;
use support::{check_cases, fixture, golden, ids, logit_tolerance, messages};
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::kv::{KvOptions, KvType};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;

fn check_model(name: &str, opts: &EngineOptions) {
    let mut engine = Engine::load(&fixture(name), opts).unwrap();
    let tol = logit_tolerance(&engine);
    check_cases(&mut engine, &golden(name), tol, usize::MAX, name);
}

#[test]
fn llama_f32_matches_transformers() {
    check_model("llama-f32", &EngineOptions::default());
}

#[test]
fn a_warmed_up_engine_still_matches_transformers() {
    // warm_up runs a throwaway prompt and two decode steps: nothing of it may stay behind.
    let mut engine = Engine::load(&fixture("qwen2-f32"), &EngineOptions::default()).unwrap();
    engine.warm_up().unwrap();
    assert_eq!(engine.position(), 0, "the warm-up's positions were given back");
    let tol = logit_tolerance(&engine);
    check_cases(&mut engine, &golden("qwen2-f32"), tol, 64, "qwen2-f32 after warm_up");
}

#[test]
fn qwen2_f32_matches_transformers() {
    check_model("qwen2-f32", &EngineOptions::default());
}

#[test]
fn qwen2_bf16_matches_transformers() {
    check_model("qwen2-bf16", &EngineOptions::default());
}

#[test]
fn mistral_f16_matches_transformers() {
    check_model("mistral-f16", &EngineOptions::default());
}

/// Mistral's `sliding_window` (Mistral-7B-v0.1 sets 4096), here 16 on every layer: the fixture
/// with its config.json so set gives transformers' greedy ids (scripts/make_window_goldens.py
/// mistral), which differ from full attention's. The old loader ignored the window.
#[test]
fn mistral_with_a_sliding_window_matches_transformers() {
    let golden = support::read_json(&fixture("mistral-f16").join("window.json"));
    let dir = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(fixture("mistral-f16")).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
    }
    let config = dir.path().join("config.json");
    let mut c = support::read_json(&config);
    c["sliding_window"] = golden["sliding_window"].clone();
    std::fs::write(&config, c.to_string()).unwrap();
    let mut engine = Engine::load(dir.path(), &EngineOptions::default()).unwrap();
    let want = ids(&golden["greedy_ids"]);
    let req = Request {
        prompt_ids: ids(&golden["prompt_ids"]),
        max_tokens: want.len(),
        sampling: SamplingParams::default(),
        stop_at_eos: false,
    };
    assert_eq!(engine.generate(&req, |_| true).unwrap().ids, want);
}

/// Qwen3: per-head q/k RMSNorm before RoPE, head_dim 32 where hidden / heads is 16.
#[test]
fn qwen3_bf16_matches_transformers() {
    check_model("qwen3-bf16", &EngineOptions::default());
}

/// Gemma 3: five local layers (sliding window 16, RoPE base 10000) and a global one (base 1e6,
/// linear scaling x8), (1 + w) norms before and after attention and MLP, GeGLU, q/k norms,
/// query_pre_attn_scalar 24 against head_dim 32, embeddings scaled by sqrt(hidden); prompts of 1
/// to 1500 tokens, one of exactly the window (its decode crosses it).
#[test]
fn gemma3_bf16_matches_transformers() {
    check_model("gemma3-bf16", &EngineOptions::default());
}

/// K and V stored as f16 (`--kv-type f16`): the same greedy ids, logits within the tolerance of
/// a GPU's f16 tensor-core arithmetic; Mistral, Qwen3 (its q/k norm rewrites K in the cache) and
/// Gemma 3 (local layers' windows).
#[test]
fn f16_kv_caches_match_transformers_too() {
    let kv = KvOptions { dtype: KvType::F16, ..Default::default() };
    let opts = EngineOptions { forward: ForwardOptions { kv, ..Default::default() }, ..Default::default() };
    for name in ["mistral-f16", "qwen3-bf16", "gemma3-bf16"] {
        let mut engine = Engine::load(&fixture(name), &opts).unwrap();
        check_cases(&mut engine, &golden(name), 5e-2, usize::MAX, &format!("{name}, f16 KV"));
    }
}

#[test]
fn flash_attention_for_every_context_matches_too() {
    // Threshold 1: every prompt but the 1-token one runs the flash kernel.
    let opts = EngineOptions {
        forward: ForwardOptions { attn_threshold: Some(1), ..Default::default() },
        ..Default::default()
    };
    check_model("llama-f32", &opts);
}

#[test]
fn tokenizer_and_chat_template_match_transformers() {
    for name in ["llama-f32", "qwen2-f32", "qwen2-bf16", "mistral-f16", "qwen3-bf16", "gemma3-bf16"] {
        let g = golden(name);
        let tok = wginfer::tokenizer::TextTokenizer::from_hf_dir(&fixture(name)).unwrap();
        for case in g["encode"].as_array().unwrap() {
            let text = case["text"].as_str().unwrap();
            assert_eq!(tok.encode(text, false).unwrap(), ids(&case["ids"]), "{name}: {text:?}");
        }
        let chat = &g["chat"];
        let msgs = messages(&chat["messages"]);
        assert_eq!(tok.render_chat(&msgs).unwrap(), chat["text"].as_str().unwrap(), "{name}: chat text");
        assert_eq!(tok.encode_chat(&msgs).unwrap(), ids(&chat["ids"]), "{name}: chat ids");
    }
}

/// The acceptance check as a user runs it: the CLI's JSON ids equal transformers' for the
/// longest prompt.
#[test]
fn cli_json_reproduces_greedy_ids_for_1500_tokens() {
    let name = "qwen2-bf16";
    let case = golden(name)["cases"].as_array().unwrap().iter().find(|c| c["prompt_len"] == 1500).unwrap().clone();
    let prompt: Vec<String> = ids(&case["prompt_ids"]).iter().map(u32::to_string).collect();
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
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).expect("exactly one JSON object on stdout");
    assert_eq!(ids(&v["ids"]), ids(&case["greedy_ids"]));
    assert_eq!(ids(&v["prompt_ids"]).len(), 1500);
    for key in ["text", "ttft_ms", "prefill_tok_s", "decode_tok_s"] {
        assert!(v.get(key).is_some(), "{key}");
    }
}

#[test]
fn streaming_detokenization_never_splits_a_character() {
    let tok = wginfer::tokenizer::TextTokenizer::from_hf_dir(&fixture("llama-f32")).unwrap();
    let text = "Grüße, café 😀 — naïve 東京 ok";
    let ids = tok.encode(text, false).unwrap();
    assert!(ids.len() > text.chars().count() / 2, "byte-level pieces");
    let mut stream = wginfer::tokenizer::StreamDecoder::default();
    let mut out = String::new();
    for id in ids {
        if let Some(piece) = stream.push(&tok, id).unwrap() {
            assert!(!piece.contains('\u{FFFD}'), "{piece:?}");
            out.push_str(&piece);
        }
    }
    assert_eq!(out, text);
}

/// Decode queues each step before the previous one's id is read back; a generation stopped
/// early takes the queued step back: the cache holds exactly the tokens that ran, and going on
/// from it gives the logits of a fresh run over the whole sequence.
#[test]
fn a_stopped_generation_leaves_the_cache_as_if_nothing_was_queued() {
    let name = "qwen2-f32";
    let cases = golden(name)["cases"].as_array().unwrap().clone();
    let prompt = cases.iter().map(|c| ids(&c["prompt_ids"])).find(|p| (8..=64).contains(&p.len())).unwrap();
    let mut engine = Engine::load(&fixture(name), &EngineOptions::default()).unwrap();
    let req =
        Request { prompt_ids: prompt.clone(), max_tokens: 10, sampling: SamplingParams::default(), stop_at_eos: false };
    let mut seen = 0;
    let got = engine.generate(&req, |_| {
        seen += 1;
        seen < 3
    });
    let got = got.unwrap().ids;
    assert_eq!(got.len(), 3);
    // The prompt and the two tokens whose steps ran; the third was only chosen.
    assert_eq!(engine.position() as usize, prompt.len() + 2);
    let whole: Vec<u32> = prompt.iter().chain(&got).copied().chain([5, 6]).collect();
    let continued = engine.prompt_logits(&whole).unwrap();
    let want = Engine::load(&fixture(name), &EngineOptions::default()).unwrap().prompt_logits(&whole).unwrap();
    let worst = continued.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    let tol = logit_tolerance(&engine);
    assert!(worst <= tol, "logits after a stopped generation differ by up to {worst} (tolerance {tol})");
}
