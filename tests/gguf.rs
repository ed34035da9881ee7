//! GGUF models: tiny llama/qwen2 files with quantized weights against transformers loading the
//! same files, the default model (SmolLM2-135M-Instruct, Q4_1) against transformers, and
//! malformed files.

mod support;

use std::path::PathBuf;

use serde_json::Value;
use support::{check_cases, fixture, golden, ids, logit_tolerance, messages, read_json};
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::sampling::SamplingParams;
use wginfer::tokenizer::TextTokenizer;

fn gguf(stem: &str) -> PathBuf {
    fixture("gguf").join(format!("{stem}.gguf"))
}

fn check_tiny(stem: &str) {
    let golden = read_json(&fixture("gguf").join(format!("{stem}.golden.json")));
    let mut engine = Engine::load(&gguf(stem), &EngineOptions::default()).unwrap();
    let tol = logit_tolerance(&engine);
    check_cases(&mut engine, &golden, tol, usize::MAX, stem);
}

#[test]
fn tiny_llama_q8_0_matches_transformers() {
    check_tiny("tiny-llama-q8_0");
}

#[test]
fn tiny_llama_mixed_quant_types_match_transformers() {
    check_tiny("tiny-llama-mixed");
}

#[test]
fn tiny_qwen2_q8_0_matches_transformers() {
    check_tiny("tiny-qwen2-q8_0");
}

/// The tokenizer built from a tiny GGUF's metadata against transformers' tokenizer of the
/// folder it was converted from: that folder's golden chat and encodings, and the GGUF golden's
/// further strings. Those were encoded by transformers' own GGUF tokenizer, which lacks Qwen2's
/// NFC normalizer: where it differs from the folder's tokenizer, `tokenizer_differences` holds
/// the folder's ids ("hf_auto"), and those are the ones to match.
#[test]
fn gguf_tokenizer_matches_transformers() {
    for stem in ["tiny-llama-q8_0", "tiny-llama-mixed", "tiny-qwen2-q8_0"] {
        let g = read_json(&fixture("gguf").join(format!("{stem}.golden.json")));
        let source = golden(g["source_fixture"].as_str().unwrap());
        let tok = TextTokenizer::from_gguf(&wginfer::model::gguf::Gguf::open(&gguf(stem)).unwrap()).unwrap();
        let differences = g["tokenizer_differences"].as_array().unwrap();
        let folder_ids = |case: &Value| {
            let differs = differences.iter().find(|d| d["text"] == case["text"]);
            ids(differs.map_or(&case["ids"], |d| &d["hf_auto"]))
        };
        for case in source["encode"].as_array().unwrap().iter().chain(g["encode"].as_array().unwrap()) {
            let text = case["text"].as_str().unwrap();
            assert_eq!(tok.encode(text, false).unwrap(), folder_ids(case), "{stem}: {text:?}");
        }
        let chat = &source["chat"];
        let msgs = messages(&chat["messages"]);
        assert_eq!(tok.render_chat(&msgs).unwrap(), chat["text"].as_str().unwrap(), "{stem}: chat text");
        assert_eq!(tok.encode_chat(&msgs).unwrap(), ids(&chat["ids"]), "{stem}: chat ids");
    }
}

/// The default model; `make test` fetches it first (scripts/fetch_default_model.sh).
fn smollm2() -> PathBuf {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("assets/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(p.exists(), "{} is missing: run scripts/fetch_default_model.sh (make model)", p.display());
    p
}

#[test]
fn smollm2_chat_greedy_ids_match_transformers() {
    let golden = read_json(&fixture("smollm2").join("golden.json"));
    let mut engine = Engine::load(&smollm2(), &EngineOptions::default()).unwrap();
    let tok = engine.tokenizer.take().unwrap();
    for case in golden["chat"].as_array().unwrap() {
        let msgs = messages(&case["messages"]);
        assert_eq!(tok.render_chat(&msgs).unwrap(), case["text"].as_str().unwrap());
        let prompt = tok.encode_chat(&msgs).unwrap();
        assert_eq!(prompt, ids(&case["prompt_ids"]));
        engine.reset();
        let req =
            Request { prompt_ids: prompt, max_tokens: 16, sampling: SamplingParams::default(), stop_at_eos: false };
        assert_eq!(engine.generate(&req, |_| true).unwrap().ids, ids(&case["greedy_ids"]), "{:?}", case["messages"]);
    }
    for case in golden["encode"].as_array().unwrap() {
        let text = case["text"].as_str().unwrap();
        assert_eq!(tok.encode(text, false).unwrap(), ids(&case["ids"]), "{text:?}");
    }
}

mod malformed {
    use super::*;

    /// A copy of a tiny GGUF with `f` applied to its bytes; the load error, as one line.
    fn load_error(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut bytes = std::fs::read(gguf("tiny-llama-q8_0")).unwrap();
        f(&mut bytes);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.gguf");
        std::fs::write(&path, &bytes).unwrap();
        match Engine::load(&path, &EngineOptions::default()) {
            Ok(_) => panic!("a malformed file loaded"),
            Err(e) => {
                let msg = format!("{e:#}");
                assert!(msg.contains("bad.gguf"), "{msg}");
                msg
            }
        }
    }

    fn find(bytes: &[u8], needle: &[u8]) -> usize {
        bytes.windows(needle.len()).position(|w| w == needle).unwrap()
    }

    #[test]
    fn bad_magic() {
        assert!(load_error(|b| b[0] = b'X').contains("magic"));
    }

    #[test]
    fn truncated_header() {
        assert!(load_error(|b| b.truncate(100)).contains("truncated"));
    }

    #[test]
    fn tensor_data_past_end_of_file() {
        assert!(load_error(|b| b.truncate(b.len() - 100)).contains("past the end"));
    }

    #[test]
    fn absurd_counts_and_lengths() {
        // The tensor count (bytes 8..16), then the first key's string length (bytes 24..32).
        assert!(load_error(|b| b[8..16].copy_from_slice(&u64::MAX.to_le_bytes())).contains("tensor count"));
        assert!(load_error(|b| b[24..32].copy_from_slice(&(1u64 << 60).to_le_bytes())).contains("length"));
    }

    #[test]
    fn unknown_quant_type() {
        // The type field follows the dims of the first tensor info: token_embd's name, then
        // n_dims (2), ne0, ne1, type.
        let msg = load_error(|b| {
            let at = find(b, b"token_embd.weight") + "token_embd.weight".len() + 4 + 16;
            b[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
        });
        assert!(msg.contains("ggml type 99") && msg.contains("token_embd.weight"), "{msg}");
    }
}
