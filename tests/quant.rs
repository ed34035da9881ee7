//! The quantized types against ggml's dequantization (values from the `gguf` Python package,
//! tests/fixtures/quant_blocks.json): the CPU reference, and the GPU's `w_load4` through the
//! embedding gather (one row per case) and through matmul (decode and prefill cores).

mod support;

use serde_json::Value;
use support::{fixture, read_json};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::model::quant::{dequantize, to_gpu_layout};
use wginfer::model::tensor::DType;
use wginfer::ops::embedding::Embedding;
use wginfer::ops::linear::{LinearConfig, GEMV_MAX_ROWS};
use wginfer::ops::matmul::Matmul;
use wginfer::ops::{Step, Weight};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn f32s(s: &str) -> Vec<f32> {
    hex(s).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn dtype(name: &str) -> DType {
    match name {
        "Q8_0" => DType::Q8_0,
        "Q4_0" => DType::Q4_0,
        "Q4_1" => DType::Q4_1,
        "Q5_0" => DType::Q5_0,
        "Q4_K" => DType::Q4_K,
        "Q6_K" => DType::Q6_K,
        other => panic!("unknown type {other}"),
    }
}

/// (type, quantized bytes, expected values) of every case.
fn cases() -> Vec<(DType, Vec<u8>, Vec<f32>, String)> {
    let v: Value = read_json(&fixture("quant_blocks.json"));
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let label = format!("{} {}", c["type"].as_str().unwrap(), c["row"].as_str().unwrap());
            (
                dtype(c["type"].as_str().unwrap()),
                hex(c["quant_hex"].as_str().unwrap()),
                f32s(c["dequant_f32_hex"].as_str().unwrap()),
                label,
            )
        })
        .collect()
}

fn assert_close(got: &[f32], want: &[f32], label: &str) {
    assert_eq!(got.len(), want.len(), "{label}");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-6 * w.abs().max(1.0), "{label}: value {i}: got {g}, want {w}");
    }
}

#[test]
fn cpu_dequantization_matches_ggml() {
    let all = cases();
    assert_eq!(all.len(), 30, "five rows of six types");
    for (t, q, want, label) in all {
        assert_close(&dequantize(t, &q), &want, &label);
    }
}

fn gpu() -> Gpu {
    Gpu::new(&GpuOptions::default()).unwrap()
}

#[test]
fn gpu_gather_dequantizes_like_ggml() {
    let gpu = gpu();
    for (t, q, want, label) in cases() {
        let cols = want.len();
        // Two rows: the case's row twice, gathered as ids [1, 0].
        let row = to_gpu_layout(t, &q);
        let table = Weight::upload(&gpu, "table", t.gpu_type(), 2, cols, &[row.clone(), row].concat()).unwrap();
        let ids = gpu.storage_from("ids", bytemuck::cast_slice(&[1u32, 0])).unwrap();
        let x = gpu.storage("x", (2 * cols * 4) as u64).unwrap();
        let step = Step::buffer(&gpu).unwrap();
        Step { n_tokens: 2, ..Default::default() }.write(&gpu, &step);
        let op = Embedding::new(&gpu, &table, &step, &ids, &x).unwrap();
        gpu.run_pass(|p| op.record(p, 2)).unwrap();
        let got: Vec<f32> = bytemuck::cast_slice(&gpu.read_back(&x, (2 * cols * 4) as u64).unwrap()).to_vec();
        assert_close(&got[..cols], &want, &label);
        assert_close(&got[cols..], &want, &label);
    }
}

#[test]
fn gpu_matmul_reads_quantized_weights() {
    let gpu = gpu();
    for (t, q, want, label) in cases().into_iter().filter(|c| c.3.ends_with("normal")) {
        let cols = want.len();
        // A [16, cols] weight of the same row with rows scaled by the input instead: y[m, n] =
        // sum_k x[m, k] w[k]; checks the GEMV (1 row) and prefill (9 rows) cores; 16 rows
        // make whole tensor-core fragments where the adapter has them.
        let row = to_gpu_layout(t, &q);
        let w = Weight::upload(&gpu, "w", t.gpu_type(), 16, cols, &row.repeat(16)).unwrap();
        for rows in [1usize, 9] {
            let x: Vec<f32> = (0..rows * cols).map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0).collect();
            let xb = gpu.storage_from("x", bytemuck::cast_slice(&x)).unwrap();
            let yb = gpu.storage("y", (rows * 16 * 4) as u64).unwrap();
            let step = Step::buffer(&gpu).unwrap();
            Step { n_tokens: rows as u32, ..Default::default() }.write(&gpu, &step);
            let cfg = LinearConfig::for_adapter(&gpu.caps);
            let op = Matmul::new(&gpu, &cfg, &w, &step, &xb, &yb, false, true).unwrap();
            let f16_products = rows as u32 > GEMV_MAX_ROWS && cfg.coop_for(w.ty, cols as u32, 16).is_some();
            gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
            let got: Vec<f32> = bytemuck::cast_slice(&gpu.read_back(&yb, (rows * 16 * 4) as u64).unwrap()).to_vec();
            for m in 0..rows {
                let products = (0..cols).map(|k| x[m * cols + k] as f64 * want[k] as f64);
                let dot: f64 = products.clone().sum();
                // Tensor cores round x and the weights to f16 (11 significant bits each), so
                // each product may be off by 2^-10 of itself.
                let tol = match f16_products {
                    true => 1e-3 * products.map(f64::abs).sum::<f64>(),
                    false => 1e-3 * dot.abs().max(1.0),
                };
                for n in 0..16 {
                    let g = got[m * 16 + n];
                    assert!((g as f64 - dot).abs() <= tol, "{label} rows={rows}: got {g}, want {dot}");
                }
            }
        }
    }
}
