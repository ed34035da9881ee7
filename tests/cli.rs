//! The `wginfer` binary as a user runs it.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn wginfer() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wginfer"))
}

#[test]
fn info_lists_adapters_and_limits() {
    let out = wginfer().arg("info").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    for key in ["adapters:", "[0]", "backend:", "driver:", "features:", "max_storage_binding="] {
        assert!(text.contains(key), "{key} in {text}");
    }
    let out = wginfer().args(["info", "--model", fixture("qwen2-bf16").to_str().unwrap()]).output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("Qwen2"));
}

/// Options that did nothing, or did something else than they say, are refused naming the
/// option: the paged pool's options with a ring, an empty API key (it
/// left the server open), an origin that is no header value (refused only after the load),
/// counts of zero (made-up figures); a sliding window's error no longer suggests itself.
#[test]
fn options_that_would_be_ignored_or_misread_are_refused() {
    let model = fixture("llama-f32");
    let model = model.to_str().unwrap();
    let generate = ["generate", "--model", model, "--prompt-ids", "1,2,3", "--max-tokens", "2"];
    let cases: [(&[&str], &str); 7] = [
        (&["--kv-block", "32"], "--kv-block sizes the paged pool's blocks: it needs --kv paged"),
        (&["--kv-memory", "1"], "--kv-memory sizes the paged pool: it needs --kv paged"),
        (&["--context", "2", "--sliding-window"], "3 tokens do not fit the context of 2 tokens (raise --context)"),
        (&["serve", "--model", model, "--port", "0", "--api-key", ""], "--api-key is empty"),
        (&["serve", "--model", model, "--port", "0", "--cors", "bad\u{7f}origin"], "is not a valid origin"),
        (
            &["bench", "e2e", "--synthetic", "smollm2-135m", "--prefill", "0"],
            "'0' for '--prefill <PREFILL>': must be at least 1",
        ),
        (&["bench", "batch-sweep", "--synthetic", "smollm2-135m", "--prompt", "0"], "must be at least 1"),
    ];
    for (args, says) in cases {
        let full: Vec<&str> = match args[0] {
            "serve" | "bench" => args.to_vec(),
            _ => generate.iter().chain(args).copied().collect(),
        };
        let out = wginfer().args(&full).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(says), "{full:?}: {err}");
    }
}

#[test]
fn same_seed_same_text() {
    let run = |seed: &str| {
        let model = fixture("llama-f32");
        let args = ["generate", "--model", model.to_str().unwrap(), "--prompt", "Hello", "--max-tokens", "12"];
        let out = wginfer().args(args).args(["--temperature", "1.0", "--seed", seed, "--json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["ids"].clone()
    };
    assert_eq!(run("11"), run("11"));
    assert_ne!(run("11"), run("12"));
}

#[test]
fn chat_loop_answers_and_keeps_going_after_an_error() {
    let mut child = wginfer()
        .args(["chat", "--model", fixture("qwen2-f32").to_str().unwrap(), "--max-tokens", "5", "--context", "64"])
        .args(["--temperature", "0"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The second turn overflows the 64-position context: an error, then the chat goes on; so
    // does a line that is not UTF-8 (Latin-1 "caf\xe9").
    let long = "word ".repeat(80);
    let stdin = child.stdin.as_mut().unwrap();
    write!(stdin, "hello\n{long}\n/reset\n").unwrap();
    stdin.write_all(b"caf\xe9\nhi again\n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("error: ") && stderr.contains("context of 64"), "{stderr}");
    assert!(stderr.contains("not UTF-8 text"), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2, "two answers");
}

#[test]
fn profile_prints_a_breakdown() {
    let model = fixture("llama-f32");
    let args = ["generate", "--model", model.to_str().unwrap(), "--prompt-ids", "1,2,3"];
    let out = wginfer().args(args).args(["--max-tokens", "2", "--temperature", "0", "--profile"]).output().unwrap();
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("qkv_rope") || err.contains("cannot write timestamps"), "{err}");
}

#[test]
fn bench_kernels_reports_every_weight_type() {
    let out = wginfer().args(["bench", "kernels", "--quick", "--reps", "3", "--json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if err.contains("cannot write timestamps") {
        return; // an adapter without in-pass timestamps has nothing to measure with
    }
    assert!(out.status.success(), "{err}");
    let rows: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // The 512-column shape is whole blocks of every type.
    let gemv = rows.iter().filter(|r| r["kernel"] == "gemv");
    let types: std::collections::BTreeSet<&str> = gemv.map(|r| r["type"].as_str().unwrap()).collect();
    assert_eq!(types.len(), wginfer::ops::weight::WeightType::ALL.len(), "{types:?}");
    assert!(rows.iter().all(|r| r["median_us"].as_f64().unwrap() > 0.0));
    // The limits come first, then every kernel, each measured against them; the launch probe
    // measures a latency (no bytes, no limit).
    assert_eq!(rows[0]["kernel"], "probe_read");
    let (launch, measured): (Vec<_>, Vec<_>) = rows.iter().partition(|r| r["kernel"] == "probe_launch");
    assert_eq!(launch.len(), 5);
    assert!(measured
        .iter()
        .all(|r| r["gb_s"].as_f64().unwrap() > 0.0 && r["percent_of_limit"].as_f64().unwrap() > 0.0));
    let kernels: std::collections::BTreeSet<&str> = rows.iter().map(|r| r["kernel"].as_str().unwrap()).collect();
    let every = ["attention_plain", "attention_flash", "rmsnorm", "input_f16", "embedding", "qkv_rope", "swiglu"];
    for k in every.into_iter().chain(["argmax", "sample"]) {
        assert!(kernels.contains(k), "{k} missing from {kernels:?}");
    }
    assert!(kernels.contains("matmul_tiled") || kernels.contains("matmul_coop"), "{kernels:?}");
}

#[test]
fn bench_e2e_reports_speeds_and_launches() {
    let model = fixture("llama-f32");
    let args =
        ["bench", "e2e", "--model", model.to_str().unwrap(), "--prefill", "8,20", "--decode", "4", "--runs", "1"];
    let out = wginfer().args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["prefill_tok_s"]["8"].as_f64().unwrap() > 0.0 && v["prefill_tok_s"]["20"].as_f64().unwrap() > 0.0);
    assert!(v["decode_tok_s"].as_f64().unwrap() > 0.0);
    // embedding + 5 per layer (2 layers) + final norm, LM head, argmax
    assert_eq!(v["dispatches_per_decode_step"], 14);
}

#[test]
fn tune_stores_shapes_that_later_runs_use() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("tune.json");
    let model = fixture("llama-f32");
    let m = model.to_str().unwrap();
    let out = wginfer()
        .args(["tune", "--model", m, "--quick", "--reps", "2", "--cache", cache.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Every variant is reported: the heuristic's and the sweep's, for each weight shape.
    assert!(stdout.contains("stored 5 GEMV shapes"), "{stdout}");
    assert!(stdout.lines().filter(|l| l.contains(" f32 ")).count() >= 5 * 16, "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&cache).unwrap()).unwrap();
    assert_eq!(v["entries"][0]["gemv"].as_object().unwrap().len(), 5);
    // A run that uses the tuned shapes still gives transformers' greedy ids.
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(model.join("golden.json")).unwrap()).unwrap();
    let case = &golden["cases"][1];
    let prompt: Vec<String> = case["prompt_ids"].as_array().unwrap().iter().map(|x| x.to_string()).collect();
    let out = wginfer()
        .env("WGINFER_TUNE_CACHE", &cache)
        .args(["generate", "--model", m, "--prompt-ids", &prompt.join(","), "--max-tokens", "16"])
        .args(["--temperature", "0", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let got: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(got["ids"], case["greedy_ids"]);
}

#[test]
fn the_driver_pipeline_cache_is_kept_and_a_damaged_one_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let model = fixture("llama-f32");
    let run = || {
        let args = ["generate", "--model", model.to_str().unwrap(), "--prompt", "Hello", "--max-tokens", "6"];
        let out = wginfer()
            .env("XDG_CACHE_HOME", dir.path())
            .args(args)
            .args(["--temperature", "0", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["ids"].clone()
    };
    let files = || -> Vec<PathBuf> {
        let found = std::fs::read_dir(dir.path().join("wginfer")).map(|d| d.map(|e| e.unwrap().path()).collect());
        found.unwrap_or_default()
    };
    let ids = run();
    // Vulkan has a pipeline cache (lavapipe's holds only its header); GL has none.
    let backend = wginfer::gpu::Gpu::new(&Default::default()).unwrap().info.backend;
    let files = files();
    assert_eq!(files.len(), usize::from(backend == wgpu::Backend::Vulkan), "{files:?}");
    for f in &files {
        assert!(f.file_name().unwrap().to_str().unwrap().starts_with("wgpu_pipeline_cache_"), "{f:?}");
        std::fs::write(f, b"not a pipeline cache, not even its digest").unwrap();
    }
    assert_eq!(run(), ids, "a damaged cache file changes nothing but the compile time");
    for f in &files {
        // Written again: the driver's data after its digest.
        let bytes = std::fs::read(f).unwrap();
        let (digest, data) = bytes.split_first_chunk::<8>().unwrap();
        assert_eq!(u64::from_le_bytes(*digest), wginfer::gpu::cache_files::fnv1a64(data.iter().copied()));
    }
}

#[test]
fn wginfer_shaders_replaces_embedded_shader_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    // Both one-row GEMV cores: CPU adapters with 8-lane subgroups take lib/linear_gemv_rows.
    for core in ["linear_gemv", "linear_gemv_rows"] {
        std::fs::write(dir.path().join(format!("lib/{core}.wgsl")), "this is not WGSL").unwrap();
    }
    let args = ["bench", "kernels", "--quick", "--types", "f16", "--shapes", "64x64", "--reps", "1"];
    let out = wginfer().env("WGINFER_SHADERS", dir.path()).args(args).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("replacing [")
            && err.contains("\"lib/linear_gemv\"")
            && err.contains("kernel matmul failed to compile"),
        "{err}"
    );
}

/// `bench kernels --norm` times the linear cores with the input's RMSNorm fused: its rows say so,
/// and they come from the normalizing kernels (a broken lib/gemv_input_rmsnorm stops them).
#[test]
fn bench_kernels_norm_times_the_normalizing_cores() {
    let args = ["bench", "kernels", "--quick", "--types", "f16", "--shapes", "64x64", "--rows", "1,2", "--reps", "1"];
    let out = wginfer().args(args).args(["--norm", "--json"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["kernel"] == "linear_rows")
        .collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|r| r["norm"] == true && r["median_us"].as_f64().unwrap() > 0.0), "{rows:?}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("lib")).unwrap();
    std::fs::write(dir.path().join("lib/gemv_input_rmsnorm.wgsl"), "this is not WGSL").unwrap();
    let out = wginfer().env("WGINFER_SHADERS", dir.path()).args(args).arg("--norm").output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("\"lib/gemv_input_rmsnorm\""), "{err}");
}

/// `bench batch-sweep` reports every concurrency with its decode steps' speed, and a point does
/// not depend on the points run before it: every request has a prompt of its own, so none is
/// served from the prefix cache (it used to reuse the earlier points' prompts, which the pool
/// kept).
#[test]
fn batch_sweep_points_do_not_depend_on_earlier_points() {
    let model = fixture("gguf/tiny-llama-q8_0.gguf");
    let sweep = |batches: &str| -> Vec<serde_json::Value> {
        let args = ["bench", "batch-sweep", "--requests", "4", "--prompt", "32", "--answer", "4", "--json"];
        let out = wginfer().args(args).arg("--model").arg(&model).args(["--batches", batches]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let alone = sweep("2");
    let after = sweep("1,2");
    assert_eq!(after.len(), 2, "{after:?}");
    assert_eq!(after.iter().filter(|p| p["golden"] == true).count(), 1, "{after:?}");
    for p in alone.iter().chain(&after) {
        assert!(p["tokens_per_s"].as_f64().unwrap() > 0.0 && p["requests"] == 4, "{p}");
        assert!(p["decode_tokens_per_s"].as_f64().unwrap() > 0.0, "{p}");
    }
    // One client: each request's prompt step makes its first token, then 3 steps of one row.
    assert_eq!(after[0]["decode_rows"], 4 * 3, "{after:?}");
    assert_eq!(alone[0]["b"], 2);
    assert_eq!(after[1]["rows_per_step"], alone[0]["rows_per_step"], "{alone:?} {after:?}");
}

/// A batch file as editors and shells write them: a byte-order mark, CRLF, a line that is not
/// UTF-8 (Latin-1) and one with a sampling value out of range each get their own line's answer
/// while the rest run; --output naming the input is refused before anything is overwritten; a
/// NaN option is refused by name.
#[test]
fn batch_input_edge_cases_and_the_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("requests.jsonl");
    let mut bytes = "\u{feff}".as_bytes().to_vec();
    bytes.extend(b"{\"prompt_ids\": [1, 2, 3], \"max_tokens\": 2}\r\n");
    bytes.extend(b"{\"prompt\": \"caf\xe9\"}\n");
    bytes.extend(b"{\"prompt_ids\": [1, 2], \"max_tokens\": 2, \"top_p\": 2}\n");
    bytes.extend(b"{\"prompt_ids\": [4, 5], \"max_tokens\": 2}\n");
    std::fs::write(&input, &bytes).unwrap();
    let model = fixture("qwen2-f32");
    let batch = |output: &Path, extra: &[&str]| {
        let args = ["batch", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap(), "--output"];
        wginfer().args(args).arg(output).args(["--temperature", "0"]).args(extra).output().unwrap()
    };
    let refused = batch(&input, &[]);
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is the input file"));
    #[cfg(unix)]
    {
        let hard_link = dir.path().join("link.jsonl");
        std::fs::hard_link(&input, &hard_link).unwrap();
        assert!(String::from_utf8_lossy(&batch(&hard_link, &[]).stderr).contains("is the input file"));
    }
    assert_eq!(std::fs::read(&input).unwrap(), bytes, "the requests are intact");
    // A model that fails to load leaves an earlier run's answers in place.
    let earlier = dir.path().join("earlier.jsonl");
    std::fs::write(&earlier, "{\"index\": 0}\n").unwrap();
    let args = ["batch", "--model", "/nonexistent/model", "--input", input.to_str().unwrap(), "--output"];
    assert!(!wginfer().args(args).arg(&earlier).output().unwrap().status.success());
    assert_eq!(std::fs::read_to_string(&earlier).unwrap(), "{\"index\": 0}\n");
    // Nor does it leave behind an output it created.
    let fresh = dir.path().join("fresh.jsonl");
    assert!(!wginfer().args(args).arg(&fresh).output().unwrap().status.success());
    assert!(!fresh.exists(), "a failed load left {} behind", fresh.display());
    // The model's own file is refused (it was replaced by the answers, exit 0).
    let gguf = dir.path().join("model.gguf");
    std::fs::copy(fixture("gguf/tiny-llama-q8_0.gguf"), &gguf).unwrap();
    let model_bytes = std::fs::read(&gguf).unwrap();
    let args = ["batch", "--model", gguf.to_str().unwrap(), "--input", input.to_str().unwrap(), "--output"];
    let refused = wginfer().args(args).arg(&gguf).output().unwrap();
    assert!(String::from_utf8_lossy(&refused.stderr).contains("is a file of the model"), "{refused:?}");
    assert_eq!(std::fs::read(&gguf).unwrap(), model_bytes, "the model is intact");
    // So is a folder's: its config, also through a link from elsewhere; other files there are not.
    let folder = dir.path().join("folder");
    std::fs::create_dir(&folder).unwrap();
    for f in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(model.join(f), folder.join(f)).unwrap();
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink(folder.join("config.json"), dir.path().join("config-link.json")).unwrap();
    let config = std::fs::read(folder.join("config.json")).unwrap();
    let mut outputs = vec![folder.join("config.json")];
    #[cfg(unix)]
    outputs.push(dir.path().join("config-link.json"));
    for output in outputs {
        let args = ["batch", "--model", folder.to_str().unwrap(), "--input", input.to_str().unwrap(), "--output"];
        let refused = wginfer().args(args).arg(&output).output().unwrap();
        assert!(String::from_utf8_lossy(&refused.stderr).contains("is a file of the model"), "{refused:?}");
    }
    assert_eq!(std::fs::read(folder.join("config.json")).unwrap(), config, "the folder's config is intact");
    let nan = batch(&dir.path().join("x.jsonl"), &["--top-p", "nan"]);
    assert!(!nan.status.success());
    assert!(String::from_utf8_lossy(&nan.stderr).contains("top_p must be in (0, 1]"));

    let output = dir.path().join("answers.jsonl");
    let out = batch(&output, &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answers: Vec<serde_json::Value> =
        std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), 4);
    assert_eq!(answers[0]["tokens"], 2, "after the byte-order mark, before a CRLF");
    assert!(answers[1]["error"].as_str().unwrap().starts_with("line 2: not UTF-8"), "{}", answers[1]);
    assert!(answers[2]["error"].as_str().unwrap().contains("top_p must be in (0, 1], got 2"), "{}", answers[2]);
    assert_eq!(answers[3]["tokens"], 2);

    // A FIFO's reader gets every answer: the output is opened once (opened twice, the first
    // close ended the reader and the second open waited for another forever).
    #[cfg(unix)]
    {
        let fifo = dir.path().join("answers.fifo");
        assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
        let reader = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
        };
        let out = batch(&fifo, &[]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(reader.join().unwrap().lines().count(), 4);
    }
}

/// Ctrl-C or SIGTERM in the middle of a run: every finished answer is still written, in input
/// order (those after a request still running waited in memory, and died with the process),
/// and the running request is reported as not run.
#[cfg(unix)]
#[test]
fn batch_interrupted_still_writes_every_finished_answer() {
    for signal in ["-INT", "-TERM"] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("requests.jsonl");
        let short = r#"{"prompt_ids": [4, 5], "max_tokens": 2}"#;
        let long = r#"{"prompt_ids": [1, 2, 3], "max_tokens": 4000}"#;
        let lines: Vec<&str> = [short, long].into_iter().chain([short; 8]).collect();
        std::fs::write(&input, lines.join("\n") + "\n").unwrap();
        let output = dir.path().join("answers.jsonl");
        let model = fixture("qwen2-f32");
        let args = ["batch", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap(), "--output"];
        let mut child = wginfer()
            .args(args)
            .arg(&output)
            .args(["--kv", "paged", "--parallel", "16", "--context", "4096", "--temperature", "0"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The first answer written: the model runs; a second later the short ones are done.
        let start = std::time::Instant::now();
        while std::fs::read_to_string(&output).map_or(true, |t| t.is_empty()) {
            assert!(start.elapsed().as_secs() < 120, "no answer within 120 s");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        std::thread::sleep(std::time::Duration::from_secs(1));
        let kill = Command::new("kill").args([signal, &child.id().to_string()]).status().unwrap();
        assert!(kill.success());
        assert_eq!(child.wait().unwrap().code(), Some(1), "{signal}: an interrupted run fails");
        let answers: Vec<serde_json::Value> =
            std::fs::read_to_string(&output).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(answers.len(), lines.len(), "{signal}");
        assert!(answers[1]["error"].as_str().is_some_and(|e| e.contains("interrupted")), "{}", answers[1]);
        for a in answers.iter().enumerate().filter(|(i, _)| *i != 1).map(|(_, a)| a) {
            assert_eq!(a["tokens"], 2, "{signal}: {a}");
        }
    }
}

/// `wginfer batch` as a user runs it: the golden prompts (and a chat request) run together
/// through the batcher give transformers' greedy ids, answers in input order, and a bad line
/// is reported with its number while the others still run.
#[test]
fn batch_runs_a_file_of_requests_in_input_order() {
    let name = "qwen2-f32";
    let golden: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture(name).join("golden.json")).unwrap()).unwrap();
    let cases: Vec<&serde_json::Value> = golden["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["prompt_ids"].as_array().unwrap().len() <= 300)
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("requests.jsonl");
    let mut lines: Vec<String> = cases
        .iter()
        .map(|c| serde_json::json!({"prompt_ids": c["prompt_ids"], "max_tokens": 16, "temperature": 0}).to_string())
        .collect();
    lines.insert(2, r#"{"prompt": "hi", "max_tokns": 3}"#.to_string());
    lines.push(
        serde_json::json!({"messages": golden["chat"]["messages"], "max_tokens": 4, "priority": "background"})
            .to_string(),
    );
    std::fs::write(&input, lines.join("\n") + "\n").unwrap();
    let model = fixture(name);
    let args = ["batch", "--model", model.to_str().unwrap(), "--input", input.to_str().unwrap()];
    let out = wginfer().args(args).args(["--kv", "paged", "--parallel", "4", "--temperature", "0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 3") && err.contains("max_tokns"), "{err}");
    let answers: Vec<serde_json::Value> =
        String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(answers.len(), lines.len());
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a["index"], i, "input order");
    }
    assert!(answers[2]["error"].as_str().unwrap().contains("line 3"));
    let ok: Vec<&serde_json::Value> = answers.iter().filter(|a| a.get("ids").is_some()).collect();
    for (a, c) in ok.iter().zip(&cases) {
        assert_eq!(a["ids"], c["greedy_ids"], "{} prompt tokens", c["prompt_ids"].as_array().unwrap().len());
        assert_eq!(a["prompt_ids"], c["prompt_ids"]);
    }
    let chat = ok.last().unwrap();
    assert_eq!(chat["prompt_ids"], golden["chat"]["ids"], "the chat template");
    assert_eq!(chat["tokens"], 4);
}

/// Streamed text ends as the whole decode does: the tail a stream holds back (ids ending inside
/// a character: the fixture's random weights produce byte tokens) is printed at the end.
#[test]
fn streamed_generate_prints_what_json_reports() {
    let model = fixture("llama-f32");
    let run = |n: usize, json: bool| {
        let args = ["generate", "--model", model.to_str().unwrap(), "--prompt", "Hello", "--temperature", "0"];
        let mut c = wginfer();
        c.args(args).args(["--max-tokens", &n.to_string()]);
        if json {
            c.arg("--json");
        }
        let out = c.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    for n in 1..=8 {
        let v: serde_json::Value = serde_json::from_str(&run(n, true)).unwrap();
        let streamed = run(n, false);
        assert_eq!(streamed.strip_suffix('\n').unwrap(), v["text"].as_str().unwrap(), "{n} tokens");
    }
}
