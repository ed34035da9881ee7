//! Input edge cases (issue 13, point 5): each is a clear error naming what is wrong, or a
//! documented behaviour, through the library and the binary. The table in docs/RELIABILITY.md
//! points here.

mod support;

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;
use support::{fixture, seq_request};
use wginfer::engine::{Engine, EngineOptions, Finish, Request};
use wginfer::sampling::SamplingParams;
use wginfer::sched::{BatchOptions, Batcher, SeqEvent, SeqRequest};
use wginfer::tokenizer::{plain_transcript, Message, TextTokenizer};

fn wginfer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_wginfer")).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A copy of fixture `name` in a temporary folder, to be changed by the test.
fn copy_of(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture(name)).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    dir
}

/// Every event of `reqs` run through a batcher until it is idle.
fn run_batch(e: &mut Engine, reqs: Vec<SeqRequest>) -> Vec<SeqEvent> {
    let mut b = Batcher::new(e, BatchOptions::default());
    for r in reqs {
        b.submit(r);
    }
    let mut events = Vec::new();
    for _ in 0..200 {
        events.extend(b.step(e).unwrap());
        if b.is_idle() {
            return events;
        }
    }
    panic!("the batcher did not finish in 200 steps");
}

#[test]
fn an_empty_prompt_is_an_error_and_the_others_still_run() {
    let mut e = Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap();
    let req = Request { prompt_ids: vec![], max_tokens: 4, sampling: SamplingParams::default(), stop_at_eos: false };
    assert!(format!("{:#}", e.generate(&req, |_| true).unwrap_err()).contains("the prompt is empty"));
    let events = run_batch(&mut e, vec![seq_request(1, &[], 4), seq_request(2, &[5, 6, 7], 3)]);
    let failed = events.iter().find_map(|ev| match ev {
        SeqEvent::Failed { id: 1, error } => Some(error.clone()),
        _ => None,
    });
    assert!(failed.as_ref().is_some_and(|m| m.contains("request 1") && m.contains("empty")), "{failed:?}");
    let done = events.iter().find_map(|ev| match ev {
        SeqEvent::Finished(s) if s.id == 2 => Some(s.tokens),
        _ => None,
    });
    assert_eq!(done, Some(3));
}

/// max_tokens 0: an empty answer with finish "length", through the engine and the batcher.
#[test]
fn max_tokens_zero_answers_nothing() {
    let mut e = Engine::load(&fixture("llama-f32"), &EngineOptions::default()).unwrap();
    let req =
        Request { prompt_ids: vec![5, 6], max_tokens: 0, sampling: SamplingParams::default(), stop_at_eos: false };
    let g = e.generate(&req, |_| true).unwrap();
    assert_eq!((g.ids.len(), g.finish), (0, Finish::Length));
    let events = run_batch(&mut e, vec![seq_request(7, &[5, 6], 0)]);
    assert!(!events.iter().any(|ev| matches!(ev, SeqEvent::Token { .. })));
    let finished: Vec<_> = events
        .iter()
        .filter_map(|ev| match ev {
            SeqEvent::Finished(s) => Some((s.id, s.tokens, s.finish)),
            _ => None,
        })
        .collect();
    assert_eq!(finished, [(7, 0, Finish::Length)]);
}

/// `--truncate left` keeps the end of a prompt longer than the context: the answer is the one
/// the kept tokens get as the whole prompt (the oracle: the same prompt cut by hand).
#[test]
fn truncate_left_keeps_the_end_of_a_long_prompt() {
    let model = fixture("llama-f32");
    let model = model.to_str().unwrap();
    let long: Vec<String> = (0..40).map(|i| (3 + i % 300).to_string()).collect();
    let kept = long[long.len() - 12..].join(",");
    let long = long.join(",");
    let run = |ids: &str, extra: &[&str]| {
        let base = ["generate", "--model", model, "--prompt-ids", ids, "--max-tokens", "4", "--temperature", "0"];
        wginfer(&[&base[..], &["--context", "16", "--json"], extra].concat())
    };
    let refused = run(&long, &[]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("40 tokens") && stderr(&refused).contains("16"), "{}", stderr(&refused));
    let cut = run(&long, &["--truncate", "left"]);
    assert!(cut.status.success(), "{}", stderr(&cut));
    assert!(stderr(&cut).contains("dropped the oldest 28 prompt tokens"), "{}", stderr(&cut));
    let alone = run(&kept, &[]);
    let ids = |o: &Output| serde_json::from_slice::<Value>(&o.stdout).unwrap()["ids"].clone();
    assert_eq!(ids(&cut), ids(&alone));
    // A prompt that fits is left whole, however many tokens are asked for (it was cut to one).
    let args = ["generate", "--model", model, "--prompt-ids", &kept, "--max-tokens", "5000", "--temperature", "0"];
    let fits = wginfer(&[&args[..], &["--context", "16", "--json", "--truncate", "left"]].concat());
    assert!(fits.status.success(), "{}", stderr(&fits));
    assert!(!stderr(&fits).contains("dropped"), "{}", stderr(&fits));
    let prompt_ids = serde_json::from_slice::<Value>(&fits.stdout).unwrap()["prompt_ids"].as_array().unwrap().len();
    assert_eq!(prompt_ids, 12);
}

/// `info --check` scans every value and names the tensor holding a NaN or an infinity.
#[test]
fn check_names_a_tensor_holding_nan_or_inf() {
    let dir = copy_of("llama-f32");
    let path = dir.path().join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let name = "model.layers.1.mlp.down_proj.weight";
    assert_eq!(header[name]["dtype"], "F32");
    let at = 8 + n + header[name]["data_offsets"][0].as_u64().unwrap() as usize + 4 * 5;
    let m = dir.path().to_str().unwrap();
    let clean = wginfer(&["info", "--model", m, "--check"]);
    assert!(clean.status.success(), "{}", stderr(&clean));
    assert!(String::from_utf8_lossy(&clean.stdout).contains("every value finite"));
    for bad in [f32::NAN, f32::NEG_INFINITY] {
        bytes[at..at + 4].copy_from_slice(&bad.to_le_bytes());
        std::fs::write(&path, &bytes).unwrap();
        let msg = format!("{:#}", wginfer::model::check_finite(dir.path()).unwrap_err());
        assert!(msg.contains(name) && msg.contains("element 5") && msg.contains(&format!("{bad}")), "{msg}");
        let out = wginfer(&["info", "--model", m, "--check"]);
        assert!(!out.status.success() && stderr(&out).contains(name), "{}", stderr(&out));
    }
}

/// The quantized GGUF fixtures scan clean (their blocks dequantize to finite values).
#[test]
fn check_scans_gguf_files() {
    let gguf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/gguf/tiny-llama-mixed.gguf");
    assert!(wginfer::model::check_finite(&gguf).unwrap() > 10);
}

/// A shard missing from a sharded folder is named; a shard name that is a path is refused.
#[test]
fn shards_are_named_and_stay_in_the_folder() {
    let write_index = |dir: &Path, shard: &str| {
        let header_len = {
            let b = std::fs::read(dir.join("model.safetensors")).unwrap();
            u64::from_le_bytes(b[..8].try_into().unwrap()) as usize
        };
        let b = std::fs::read(dir.join("model.safetensors")).unwrap();
        let header: Value = serde_json::from_slice(&b[8..8 + header_len]).unwrap();
        let map: serde_json::Map<String, Value> = header
            .as_object()
            .unwrap()
            .keys()
            .filter(|k| *k != "__metadata__")
            .map(|k| (k.clone(), Value::from(shard)))
            .collect();
        let index = serde_json::json!({ "weight_map": map });
        std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    };
    let dir = copy_of("llama-f32");
    write_index(dir.path(), "model-00001-of-00002.safetensors");
    let msg = load_error(dir.path());
    assert!(msg.contains("model-00001-of-00002.safetensors"), "{msg}");
    write_index(dir.path(), "../llama-f32/model.safetensors");
    let msg = load_error(dir.path());
    assert!(msg.contains("is not a file name in the model folder"), "{msg}");
}

fn load_error(dir: &Path) -> String {
    match Engine::load(dir, &EngineOptions::default()) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => format!("{e:#}"),
    }
}

/// A folder without tokenizer.json loads (ids in, ids out); text prompts are refused with the
/// file named.
#[test]
fn a_missing_tokenizer_is_named() {
    let dir = copy_of("llama-f32");
    std::fs::remove_file(dir.path().join("tokenizer.json")).unwrap();
    let m = dir.path().to_str().unwrap();
    let out = wginfer(&["generate", "--model", m, "--prompt", "hi", "--max-tokens", "2"]);
    assert!(!out.status.success() && stderr(&out).contains("tokenizer.json"), "{}", stderr(&out));
    let out = wginfer(&["generate", "--model", m, "--prompt-ids", "5,6", "--max-tokens", "2", "--temperature", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A model whose config.json claims another vocabulary than its embedding holds is refused,
/// naming the tensor and both shapes.
#[test]
fn vocabulary_and_embedding_that_disagree() {
    let dir = copy_of("llama-f32");
    let path = dir.path().join("config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let vocab = cfg["vocab_size"].as_u64().unwrap();
    cfg["vocab_size"] = (vocab + 8).into();
    std::fs::write(&path, cfg.to_string()).unwrap();
    let msg = load_error(dir.path());
    assert!(msg.contains("model.embed_tokens.weight") && msg.contains(&(vocab + 8).to_string()), "{msg}");
}

/// Without a chat template a chat is a plain transcript, and the front ends say so once.
#[test]
fn a_model_without_a_chat_template_still_chats() {
    let msgs = [Message::new("system", "Be brief."), Message::new("user", " Hi ")];
    assert_eq!(plain_transcript(&msgs), "System: Be brief.\n\nUser: Hi\n\nAssistant:");
    let dir = copy_of("llama-f32");
    let tc = dir.path().join("tokenizer_config.json");
    let mut cfg: Value = serde_json::from_slice(&std::fs::read(&tc).unwrap()).unwrap();
    cfg.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(&tc, cfg.to_string()).unwrap();
    let tok = TextTokenizer::from_hf_dir(dir.path()).unwrap();
    assert!(!tok.has_chat_template());
    // The transcript is encoded as any text prompt: with the tokenizer's own special tokens.
    assert_eq!(tok.encode_chat(&msgs).unwrap(), tok.encode(&plain_transcript(&msgs), true).unwrap());
    let m = dir.path().to_str().unwrap();
    let out =
        wginfer(&["generate", "--model", m, "--chat", "--prompt", "Hi", "--max-tokens", "3", "--temperature", "0"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("no chat template: chatting through a plain transcript"), "{}", stderr(&out));
}
