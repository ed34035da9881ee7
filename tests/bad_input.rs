//! Bad input gives one clear error naming the file, tensor or field, never a panic.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use wginfer::engine::{Engine, EngineOptions, Request};
use wginfer::kv::{KvLayout, KvOptions};
use wginfer::model::forward::ForwardOptions;
use wginfer::sampling::SamplingParams;
use wginfer::sched::{BatchOptions, Batcher, Priority, SeqEvent, SeqRequest};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama-f32")
}

/// A copy of the llama fixture in a temporary folder, to be damaged by the test.
fn copy_fixture() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(fixture()).unwrap() {
        let p = e.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    dir
}

fn load_err(dir: &Path) -> String {
    match Engine::load(dir, &EngineOptions::default()) {
        Ok(_) => panic!("loading {} should fail", dir.display()),
        Err(e) => format!("{e:#}"),
    }
}

fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "error {msg:?} should mention {p:?}");
    }
}

/// The fixture's safetensors header and data section.
fn read_safetensors(dir: &Path) -> (serde_json::Map<String, Value>, Vec<u8>) {
    let bytes = std::fs::read(dir.join("model.safetensors")).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    (header.as_object().unwrap().clone(), bytes[8 + n..].to_vec())
}

fn write_safetensors(dir: &Path, header: &serde_json::Map<String, Value>, data: &[u8]) {
    let h = serde_json::to_vec(header).unwrap();
    let mut out = (h.len() as u64).to_le_bytes().to_vec();
    out.extend(h);
    out.extend(data);
    std::fs::write(dir.join("model.safetensors"), out).unwrap();
}

/// `header` and `data` without tensor `name`, the data after it moved down, as a file written
/// without it holds them.
fn without_tensor(
    header: &serde_json::Map<String, Value>,
    data: &[u8],
    name: &str,
) -> (serde_json::Map<String, Value>, Vec<u8>) {
    let offset = |t: &Value, i: usize| t["data_offsets"][i].as_u64().unwrap() as usize;
    let mut h = header.clone();
    let removed = h.remove(name).unwrap();
    let (start, end) = (offset(&removed, 0), offset(&removed, 1));
    for t in h.iter_mut().filter(|(k, _)| *k != "__metadata__").map(|(_, t)| t) {
        for i in 0..2 {
            if offset(t, i) >= end {
                t["data_offsets"][i] = (offset(t, i) - (end - start)).into();
            }
        }
    }
    (h, [&data[..start], &data[end..]].concat())
}

#[test]
fn missing_path_and_missing_files() {
    assert_mentions(&load_err(Path::new("/nonexistent/model")), &["/nonexistent/model", "does not exist"]);
    let dir = copy_fixture();
    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    assert_mentions(&load_err(dir.path()), &["config.json"]);
    let dir = copy_fixture();
    std::fs::remove_file(dir.path().join("model.safetensors")).unwrap();
    assert_mentions(&load_err(dir.path()), &["model.safetensors"]);
}

#[test]
fn unreadable_config_and_unknown_architecture() {
    let dir = copy_fixture();
    std::fs::write(dir.path().join("config.json"), "{ not json").unwrap();
    assert_mentions(&load_err(dir.path()), &["config.json", "not valid JSON"]);
    let mut cfg: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture().join("config.json")).unwrap()).unwrap();
    cfg["architectures"] = serde_json::json!(["GPT2LMHeadModel"]);
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    assert_mentions(&load_err(dir.path()), &["config.json", "GPT2LMHeadModel"]);
    cfg["architectures"] = serde_json::json!(["LlamaForCausalLM"]);
    cfg.as_object_mut().unwrap().remove("hidden_size");
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    assert_mentions(&load_err(dir.path()), &["config.json", "hidden_size"]);
}

#[test]
fn missing_tensor_wrong_shape_wrong_dtype() {
    let name = "model.layers.1.mlp.down_proj.weight";
    let (header, data) = read_safetensors(&fixture());

    let dir = copy_fixture();
    let (h, d) = without_tensor(&header, &data, name);
    write_safetensors(dir.path(), &h, &d);
    assert_mentions(&load_err(dir.path()), &["missing tensor", name]);

    let mut h = header.clone();
    let shape = h[name]["shape"].clone();
    h.get_mut(name).unwrap()["shape"] = serde_json::json!([shape[1], shape[0]]);
    write_safetensors(dir.path(), &h, &data);
    assert_mentions(&load_err(dir.path()), &[name, "shape"]);

    let mut h = header.clone();
    h.get_mut(name).unwrap()["dtype"] = serde_json::json!("I32");
    write_safetensors(dir.path(), &h, &data);
    assert_mentions(&load_err(dir.path()), &[name, "I32"]);
}

#[test]
fn truncated_safetensors() {
    let dir = copy_fixture();
    let bytes = std::fs::read(fixture().join("model.safetensors")).unwrap();
    std::fs::write(dir.path().join("model.safetensors"), &bytes[..bytes.len() - 1000]).unwrap();
    assert_mentions(&load_err(dir.path()), &["model.safetensors", "truncated"]);
    std::fs::write(dir.path().join("model.safetensors"), &bytes[..4]).unwrap();
    assert_mentions(&load_err(dir.path()), &["model.safetensors"]);
}

#[test]
fn prompt_longer_than_context_names_both_numbers() {
    let kv = KvOptions { context: 8, ..Default::default() };
    let opts = EngineOptions { forward: ForwardOptions { kv, ..Default::default() }, ..Default::default() };
    let mut engine = Engine::load(&fixture(), &opts).unwrap();
    let req =
        Request { prompt_ids: vec![5; 9], max_tokens: 4, sampling: SamplingParams::default(), stop_at_eos: false };
    let msg = format!("{:#}", engine.generate(&req, |_| true).unwrap_err());
    assert_mentions(&msg, &["9 tokens", "context of 8"]);
    // The engine is still usable afterwards.
    let req = Request { prompt_ids: vec![5; 3], ..req };
    assert_eq!(engine.generate(&req, |_| true).unwrap().ids.len(), 4);
}

#[test]
fn token_id_out_of_range() {
    let mut engine = Engine::load(&fixture(), &EngineOptions::default()).unwrap();
    let req =
        Request { prompt_ids: vec![1, 100000], max_tokens: 1, sampling: SamplingParams::default(), stop_at_eos: false };
    assert_mentions(&format!("{:#}", engine.generate(&req, |_| true).unwrap_err()), &["100000", "vocabulary"]);
}

/// Weights that make every logit NaN (here the final norm's) leave no token to choose: the
/// step fails saying so, where the GPU argmax's u32::MAX used to come back as a token id.
#[test]
fn logits_that_are_not_numbers_are_an_error_saying_so() {
    let dir = nan_logits_model();
    let mut engine = Engine::load(dir.path(), &EngineOptions::default()).unwrap();
    let req =
        Request { prompt_ids: vec![1, 5], max_tokens: 2, sampling: SamplingParams::default(), stop_at_eos: false };
    assert_mentions(&format!("{:#}", engine.generate(&req, |_| true).unwrap_err()), &["logits are not finite"]);
}

/// The fixture with `values` of tensor `name` made NaN (a range of its f32 values).
fn nan_model(name: &str, values: std::ops::Range<usize>) -> tempfile::TempDir {
    let dir = copy_fixture();
    let (header, mut data) = read_safetensors(dir.path());
    let start = header[name]["data_offsets"][0].as_u64().unwrap() as usize;
    let bytes = &mut data[start + 4 * values.start..start + 4 * values.end];
    bytes.chunks_exact_mut(4).for_each(|v| v.copy_from_slice(&f32::NAN.to_le_bytes()));
    write_safetensors(dir.path(), &header, &data);
    dir
}

/// The fixture with its final norm's weights NaN: every logit is NaN.
fn nan_logits_model() -> tempfile::TempDir {
    let (header, _) = read_safetensors(&fixture());
    let d = header["model.norm.weight"]["shape"][0].as_u64().unwrap() as usize;
    nan_model("model.norm.weight", 0..d)
}

fn seq_request(id: u64, prompt_ids: Vec<u32>, max_tokens: usize) -> SeqRequest {
    SeqRequest {
        id,
        prompt_ids,
        max_tokens,
        sampling: SamplingParams::default(),
        stop_at_eos: false,
        priority: Priority::Interactive,
        logprobs: None,
    }
}

/// Steps `batcher` until every request has ended; the events in order.
fn run_all(batcher: &mut Batcher, engine: &mut Engine) -> Vec<SeqEvent> {
    let mut events = Vec::new();
    while !batcher.is_idle() {
        events.extend(batcher.step(engine).unwrap());
    }
    events
}

/// A request whose logits hold no number (token 7's embedding is NaN, so is everything its
/// sequence computes) fails alone, saying so, while the request beside it in the same steps,
/// greedy and with its logits brought back, gets the ids it gets alone. (One such row used to
/// fail the step, and with it every request in it.)
#[test]
fn a_request_whose_logits_are_not_numbers_fails_alone() {
    let (header, _) = read_safetensors(&fixture());
    let d = header["model.embed_tokens.weight"]["shape"][1].as_u64().unwrap() as usize;
    let dir = nan_model("model.embed_tokens.weight", 7 * d..8 * d);
    let kv = KvOptions { layout: KvLayout::Paged, parallel: 2, context: 64, ..Default::default() };
    let options = EngineOptions { forward: ForwardOptions { kv, ..Default::default() }, ..Default::default() };
    let mut engine = Engine::load(dir.path(), &options).unwrap();
    let opts = BatchOptions::for_adapter(&engine.gpu.caps);
    for logprobs in [None, Some(2)] {
        let good = SeqRequest { logprobs, ..seq_request(1, vec![1, 5, 9], 6) };
        let mut alone = Batcher::new(&mut engine, opts);
        alone.submit(good.clone());
        let tokens = |events: &[SeqEvent]| -> Vec<u32> {
            let ids = events.iter().filter_map(|e| match e {
                SeqEvent::Token { id: 1, token, .. } => Some(*token),
                _ => None,
            });
            ids.collect()
        };
        let want = tokens(&run_all(&mut alone, &mut engine));
        assert_eq!(want.len(), 6);
        let mut both = Batcher::new(&mut engine, opts);
        both.submit(SeqRequest { logprobs, ..seq_request(2, vec![1, 7, 9], 6) });
        both.submit(good);
        let events = run_all(&mut both, &mut engine);
        assert_eq!(tokens(&events), want, "logprobs {logprobs:?}");
        let failed: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                SeqEvent::Failed { id: 2, error } => Some(error.as_str()),
                _ => None,
            })
            .collect();
        assert!(
            matches!(&failed[..], [e] if e.contains("request 2") && e.contains("logits are not finite")),
            "{events:?}"
        );
        assert!(!events.iter().any(|e| matches!(e, SeqEvent::Token { id: 2, .. })), "{events:?}");
        assert_eq!(engine.forward.kv.used_blocks(), 0);
    }
}

/// A step that fails (here a validation error raised outside any scope, reported at the step's
/// wait) hands over what it finished before failing: a request of no tokens, admitted in that
/// step, gets its end. The step's events were dropped, and the server's client of such a
/// request waited forever (its route never ended).
#[test]
fn a_failed_step_keeps_the_ends_it_gathered() {
    let mut engine = Engine::load(&fixture(), &EngineOptions::default()).unwrap();
    let opts = BatchOptions::for_adapter(&engine.gpu.caps);
    let mut batcher = Batcher::new(&mut engine, opts);
    batcher.submit(seq_request(1, vec![1, 5], 4));
    // The first step only submits: its logits are read by the next.
    assert!(batcher.step(&mut engine).unwrap().is_empty());
    batcher.submit(seq_request(2, vec![1, 5], 0));
    let _ = engine.gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("unscoped"),
        size: 64,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::STORAGE,
        mapped_at_creation: false,
    });
    assert_mentions(&format!("{:#}", batcher.step(&mut engine).unwrap_err()), &["GPU error"]);
    let held = batcher.take_held();
    assert!(matches!(&held[..], [SeqEvent::Finished(s)] if s.id == 2), "{held:?}");
    // The request the step failed is dropped (its memory freed), not counted as finished as a
    // cancelled one is: the metrics count request 2 alone.
    assert!(batcher.abandon(&mut engine, 1));
    assert!(!batcher.abandon(&mut engine, 1));
    assert_eq!((batcher.metrics.finished, batcher.running(), engine.forward.kv.used_blocks()), (1, 0, 0));
}

/// The CLI turns every one of these into one line on stderr and exit status 1.
#[test]
fn cli_errors_are_one_line_with_nonzero_exit() {
    let bin = env!("CARGO_BIN_EXE_wginfer");
    let fixture = fixture();
    let cases: [&[&str]; 3] = [
        &["generate", "--model", "/nonexistent/model", "--prompt", "hi"],
        &["generate", "--model", fixture.to_str().unwrap(), "--prompt-ids", "1,2", "--context", "1"],
        &["info", "--adapter", "99"],
    ];
    for args in cases {
        let out = Command::new(bin).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("error: ") && err.trim_end().lines().count() == 1, "{args:?}: {err:?}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn attention_threshold_beyond_workgroup_memory() {
    let gpu = wginfer::gpu::Gpu::new(&Default::default()).unwrap();
    let threshold = gpu.caps.max_workgroup_storage / 4;
    let opts = EngineOptions {
        forward: ForwardOptions { attn_threshold: Some(threshold), ..Default::default() },
        ..Default::default()
    };
    let msg = match Engine::load(&fixture(), &opts) {
        Ok(_) => panic!("a threshold of {threshold} cannot fit workgroup memory"),
        Err(e) => format!("{e:#}"),
    };
    assert_mentions(&msg, &[&format!("--attn-threshold {threshold}")]);
}
