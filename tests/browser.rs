//! The tiny fixtures against transformers inside a browser (wasm32, the page's WebGPU adapter):
//! the same checks as tests/golden.rs and tests/gguf.rs, the models handed to the engine as
//! bytes, as a page hands over a picked or fetched file. `make browser-test` runs them in
//! headless Chromium (SwiftShader's WebGPU adapter: no f16, so the portable kernels).
#![cfg(target_arch = "wasm32")]

mod support;

use serde_json::Value;
use support::{check_cases_async, log, logit_tolerance};
use wasm_bindgen_test::{wasm_bindgen_test, wasm_bindgen_test_configure};
use wginfer::engine::Engine;
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::model::folder::ModelFolder;
use wginfer::model::forward::ForwardOptions;

wasm_bindgen_test_configure!(run_in_browser);

/// A fixture folder's files, built into the test (a page has no file system).
macro_rules! folder {
    ($name:literal) => {{
        let file = |n: &str, b: &[u8]| (n.to_string(), b.to_vec());
        let files = [
            file("config.json", include_bytes!(concat!("fixtures/", $name, "/config.json"))),
            file("model.safetensors", include_bytes!(concat!("fixtures/", $name, "/model.safetensors"))),
            file("tokenizer.json", include_bytes!(concat!("fixtures/", $name, "/tokenizer.json"))),
            file("tokenizer_config.json", include_bytes!(concat!("fixtures/", $name, "/tokenizer_config.json"))),
            file("generation_config.json", include_bytes!(concat!("fixtures/", $name, "/generation_config.json"))),
        ];
        let golden: Value =
            serde_json::from_slice(include_bytes!(concat!("fixtures/", $name, "/golden.json"))).unwrap();
        (ModelFolder::in_memory($name, files), golden)
    }};
}

/// A GGUF fixture's bytes and its golden.
macro_rules! gguf {
    ($stem:literal) => {{
        let bytes: &[u8] = include_bytes!(concat!("fixtures/gguf/", $stem, ".gguf"));
        let golden: Value =
            serde_json::from_slice(include_bytes!(concat!("fixtures/gguf/", $stem, ".golden.json"))).unwrap();
        (bytes, golden)
    }};
}

async fn gpu() -> Gpu {
    let gpu = Gpu::new_async(&GpuOptions::default()).await.unwrap();
    let caps = &gpu.caps;
    log(&format!("adapter {:?}: f16 {}, subgroups {}", gpu.info, caps.shader_f16, caps.subgroup));
    gpu
}

/// Prompts of up to `max_prompt` tokens: SwiftShader takes about a minute for a fixture's
/// 1500-token case, so only llama-f32 runs it (it crosses the switch to flash attention).
async fn check(mut engine: Engine, golden: &Value, max_prompt: usize, label: &str) {
    let tol = logit_tolerance(&engine);
    check_cases_async(&mut engine, golden, tol, max_prompt, label).await;
}

const SHORT: usize = 300;

async fn check_folder((folder, golden): (ModelFolder, Value), max_prompt: usize, label: &str) {
    let engine = Engine::from_folder(gpu().await, &folder, &ForwardOptions::default()).unwrap();
    check(engine, &golden, max_prompt, label).await;
}

async fn check_gguf((bytes, golden): (&[u8], Value), label: &str) {
    let engine = Engine::from_gguf_bytes(gpu().await, label, bytes, &ForwardOptions::default()).unwrap();
    check(engine, &golden, SHORT, label).await;
}

#[wasm_bindgen_test]
async fn llama_f32_matches_transformers() {
    check_folder(folder!("llama-f32"), usize::MAX, "llama-f32").await;
}

#[wasm_bindgen_test]
async fn qwen2_bf16_matches_transformers() {
    check_folder(folder!("qwen2-bf16"), SHORT, "qwen2-bf16").await;
}

#[wasm_bindgen_test]
async fn mistral_f16_matches_transformers() {
    check_folder(folder!("mistral-f16"), SHORT, "mistral-f16").await;
}

#[wasm_bindgen_test]
async fn qwen3_bf16_matches_transformers() {
    check_folder(folder!("qwen3-bf16"), SHORT, "qwen3-bf16").await;
}

#[wasm_bindgen_test]
async fn gemma3_bf16_matches_transformers() {
    check_folder(folder!("gemma3-bf16"), SHORT, "gemma3-bf16").await;
}

#[wasm_bindgen_test]
async fn tiny_llama_mixed_quant_types_match_transformers() {
    check_gguf(gguf!("tiny-llama-mixed"), "tiny-llama-mixed.gguf").await;
}

#[wasm_bindgen_test]
async fn tiny_qwen2_q8_0_matches_transformers() {
    check_gguf(gguf!("tiny-qwen2-q8_0"), "tiny-qwen2-q8_0.gguf").await;
}
