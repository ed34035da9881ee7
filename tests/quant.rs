//! The quantized types against ggml's dequantization (values from the `gguf` Python package,
//! tests/fixtures/quant_blocks.json): the CPU reference, and the GPU's `w_load4` through the
//! embedding gather and through matmul (decode and prefill cores). The GPU sees weights whose
//! rows all differ and whose rows' blocks all differ, so a wrong row or block offset reads other
//! values.

mod support;

use serde_json::Value;
use support::{fixture, read_json};
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::model::quant::{dequantize, to_gpu_layout};
use wginfer::model::tensor::DType;
use wginfer::ops::embedding::Embedding;
use wginfer::ops::linear::{LinearConfig, LinearShape, Rows, GEMV_MAX_ROWS};
use wginfer::ops::matmul::Matmul;
use wginfer::ops::weight::WeightLayout;
use wginfer::ops::{Step, Weight, WeightType};

/// Every block type, as the file types that store them.
fn types() -> Vec<DType> {
    WeightType::ALL.into_iter().filter(|t| t.is_quantized()).map(DType::stored_as).collect()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn f32s(s: &str) -> Vec<f32> {
    hex(s).chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// One fixture row of one type: its ggml bytes and the values ggml decodes from them.
struct Case {
    ty: DType,
    row: String,
    quant: Vec<u8>,
    want: Vec<f32>,
}

fn cases() -> Vec<Case> {
    let v: Value = read_json(&fixture("quant_blocks.json"));
    let types = types();
    v["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            ty: *types.iter().find(|t| format!("{t:?}") == c["type"].as_str().unwrap()).unwrap(),
            row: c["row"].as_str().unwrap().to_string(),
            quant: hex(c["quant_hex"].as_str().unwrap()),
            want: f32s(c["dequant_f32_hex"].as_str().unwrap()),
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
    for t in types() {
        assert_eq!(all.iter().filter(|c| c.ty == t).count(), 5, "five rows of {t:?}");
    }
    for c in all {
        assert_close(&dequantize(c.ty, &c.quant), &c.want, &format!("{:?} {}", c.ty, c.row));
    }
}

/// GGUF's type ids and block sizes (as gguf-py lists them in the fixture) name the same types.
#[test]
fn ggml_ids_and_block_sizes_match_gguf() {
    let v: Value = read_json(&fixture("quant_blocks.json"));
    for t in types() {
        let info = &v["types"][format!("{t:?}")];
        let id = info["ggml_type"].as_u64().unwrap() as u32;
        assert_eq!(DType::from_ggml(id), Some(t), "ggml type {id}");
        let sizes = (info["block_size"].as_u64().unwrap() as usize, info["type_size"].as_u64().unwrap() as usize);
        assert_eq!(t.block(), sizes, "{t:?}");
    }
}

fn gpu() -> Gpu {
    Gpu::new(&GpuOptions::default()).unwrap()
}

#[test]
fn gpu_gather_dequantizes_like_ggml() {
    let gpu = gpu();
    let all = cases();
    for t in types() {
        // The type's five rows as one table (no two alike), gathered in another order.
        let rows: Vec<&Case> = all.iter().filter(|c| c.ty == t).collect();
        let cols = rows[0].want.len();
        let table_bytes: Vec<u8> = rows.iter().flat_map(|c| to_gpu_layout(t, &c.quant)).collect();
        let table = Weight::upload(&gpu, "table", t.gpu_type(), rows.len(), cols, &table_bytes).unwrap();
        let order = [3u32, 0, 4, 1, 2];
        let ids = gpu.storage_from("ids", bytemuck::cast_slice(&order)).unwrap();
        let bytes = (order.len() * cols * 4) as u64;
        let x = gpu.storage("x", bytes).unwrap();
        let step = Step::buffer(&gpu).unwrap();
        Step { n_tokens: order.len() as u32, ..Default::default() }.write(&gpu, &step);
        let op = Embedding::new(&gpu, &table, &step, &ids, &x, 1.0).unwrap();
        gpu.run_pass(|p| op.record(p, order.len() as u32)).unwrap();
        let got: Vec<f32> = bytemuck::cast_slice(&gpu.read_back(&x, bytes).unwrap()).to_vec();
        for (got, &id) in got.chunks(cols).zip(&order) {
            let c = rows[id as usize];
            assert_close(got, &c.want, &format!("{t:?} {} gathered", c.row));
        }
    }
}

/// A [16, cols] weight of `t` made of whole blocks of its fixture rows `normal`, `ramp` and
/// `offset_and_tiny` (a block's values depend on its bytes alone, so ggml's values still hold):
/// row n takes the pool's blocks from block n on, every (1 + n / pool size)-th, so no two rows
/// are alike and no row repeats a block. Returns the ggml bytes and the values.
fn mixed_weight(all: &[Case], t: DType) -> (Vec<u8>, Vec<f32>) {
    let (per, size) = t.block();
    let rows = all.iter().filter(|c| c.ty == t && ["normal", "ramp", "offset_and_tiny"].contains(&c.row.as_str()));
    let pool: Vec<(&[u8], &[f32])> = rows.flat_map(|c| c.quant.chunks(size).zip(c.want.chunks(per))).collect();
    let blocks_per_row = all[0].want.len() / per;
    let p = pool.len();
    let picks: Vec<Vec<usize>> =
        (0..16).map(|n| (0..blocks_per_row).map(|b| (n + b * (1 + n / p)) % p).collect()).collect();
    for (n, row) in picks.iter().enumerate() {
        let mut distinct = row.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), row.len(), "row {n} repeats a block");
        assert!(!picks[..n].contains(row), "row {n} repeats a row");
    }
    let blocks = || picks.iter().flatten().map(|&i| pool[i]);
    (blocks().flat_map(|(q, _)| q.to_vec()).collect(), blocks().flat_map(|(_, v)| v.to_vec()).collect())
}

#[test]
fn gpu_matmul_reads_quantized_weights() {
    let gpu = gpu();
    let all = cases();
    let n = 16;
    let adapter = LinearConfig::for_adapter(&gpu.caps);
    // The adapter's cores on its weight layout; where it has f16 shaders, also the tiled core
    // over a copy of the weight dequantized once a step (`dequant_f16`), row after row.
    let dequant = LinearConfig { dequant_once: Some(u64::MAX), ..LinearConfig::default() };
    let mut configs = vec![(adapter, WeightLayout::linear(&gpu), vec![1, 4, 9, GEMV_MAX_ROWS as usize + 1, 300])];
    // The GPU cores (lanes sharing a weight row: lib/linear_gemv, lib/linear_gemv_batch) on the
    // row layout, which a CPU adapter's own config leaves to the rows core.
    configs.push((LinearConfig::default(), WeightLayout::Rows, vec![1, 4]));
    if gpu.caps.shader_f16 {
        configs.push((dequant, WeightLayout::Rows, vec![GEMV_MAX_ROWS as usize + 1, 300]));
    }
    for t in types() {
        // y[m, j] = sum_k x[m, k] w[j, k] with the GEMV (1 row), batched GEMV (4 rows) and prefill
        // (9 rows) cores; 16 weight rows make whole tensor-core fragments where the adapter has them.
        let (quant, want) = mixed_weight(&all, t);
        let cols = want.len() / n;
        for (cfg, layout, row_counts) in &configs {
            let w = Weight::upload_in(&gpu, "w", t.gpu_type(), n, cols, &to_gpu_layout(t, &quant), *layout).unwrap();
            let part = w.single().unwrap();
            let shape =
                LinearShape { k: cols as u32, n: n as u32, rows: Rows::Tokens, norm_eps: None, layout: part.layout };
            let once = cfg.dequant_once_for(t.gpu_type(), &shape);
            // Row-after-row parts (no rows core) take the copy wherever it is configured.
            let configured = cfg.dequant_once.is_some() && *layout == WeightLayout::Rows;
            assert_eq!(once, configured, "{t:?}: dequantized once where configured");
            // One row, the 4-row variant, the widest twice over (a partial second grid z), the
            // prefill core (at 300 rows past the tensor-core split core, where it dequantizes once).
            for &rows in row_counts {
                let x = input(rows * cols);
                let got = matmul(&gpu, cfg, &w, &x, rows, n);
                let prefill = rows as u32 > GEMV_MAX_ROWS;
                let f16_products = prefill && (once || cfg.coop_for(t.gpu_type(), cols as u32, n as u32).is_some());
                // f32 products: 20x the worst error on lavapipe (5e-8 of the sum of |products|).
                // Tensor cores and the f16 copy round the weights (and tensor cores x) to f16 (11
                // significant bits each), so each product may be off by 2^-10 of itself.
                let tol = if f16_products { 1e-3 } else { 1e-6 };
                expect_sums(&got, &x, &want, n, tol, &format!("{t:?} {cfg:?} rows={rows}"));
            }
        }
    }
}

/// Input rows of `len` values in all: small values of both signs, no two neighbours equal.
fn input(len: usize) -> Vec<f32> {
    (0..len).map(|i| ((i * 7 % 13) as f32 - 6.0) / 6.0).collect()
}

/// y = x w^T on the GPU through `cfg`'s core for `rows` rows of x against the `n` rows of `w`.
fn matmul(gpu: &Gpu, cfg: &LinearConfig, w: &Weight, x: &[f32], rows: usize, n: usize) -> Vec<f32> {
    let xb = gpu.storage_from("x", bytemuck::cast_slice(x)).unwrap();
    let yb = gpu.storage("y", (rows * n * 4) as u64).unwrap();
    let step = Step::buffer(gpu).unwrap();
    Step { n_tokens: rows as u32, ..Default::default() }.write(gpu, &step);
    let op = Matmul::new(gpu, cfg, w, &step, &xb, &yb, false, Rows::Tokens).unwrap();
    gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
    bytemuck::cast_slice(&gpu.read_back(&yb, (rows * n * 4) as u64).unwrap()).to_vec()
}

/// Each y[m, j] of `got` (rows of `n` values) against sum_k x[m, k] want[j, k], within `tol`
/// times the sum of the products' magnitudes.
fn expect_sums(got: &[f32], x: &[f32], want: &[f32], n: usize, tol: f64, what: &str) {
    let cols = want.len() / n;
    for m in 0..got.len() / n {
        for j in 0..n {
            let products = (0..cols).map(|k| x[m * cols + k] as f64 * want[j * cols + k] as f64);
            let dot: f64 = products.clone().sum();
            let size: f64 = products.map(f64::abs).sum();
            let g = got[m * n + j] as f64;
            assert!((g - dot).abs() <= tol * size, "{what}: y[{m}, {j}] = {g}, want {dot}");
        }
    }
}

/// An LM head's Q4_K weight (32768 rows or more) takes the one-row GEMV core's long runs
/// (lib/weight_q4_k_run): its sums against ggml's values, rows built from the fixture's blocks
/// in an order that differs from row to row.
#[test]
fn gpu_gemv_long_runs_read_lm_head_q4_k() {
    let gpu = gpu();
    let all = cases();
    let t = DType::stored_as(WeightType::Q4_K);
    let (per, size) = t.block();
    let (quant, want) = mixed_weight(&all, t);
    let blocks: Vec<(&[u8], &[f32])> = quant.chunks(size).zip(want.chunks(per)).collect();
    let (n, per_row) = (32768, 2);
    let cols = per_row * per;
    let pick = |r: usize, b: usize| blocks[(r * 7 + b * 3 + r / blocks.len()) % blocks.len()];
    let row_blocks = || (0..n).flat_map(|r| (0..per_row).map(move |b| pick(r, b)));
    let quant: Vec<u8> = row_blocks().flat_map(|(q, _)| q.to_vec()).collect();
    let want: Vec<f32> = row_blocks().flat_map(|(_, v)| v.to_vec()).collect();
    let w =
        Weight::upload_in(&gpu, "w", WeightType::Q4_K, n, cols, &to_gpu_layout(t, &quant), WeightLayout::Rows).unwrap();
    let x = input(cols);
    let got = matmul(&gpu, &LinearConfig::default(), &w, &x, 1, n);
    expect_sums(&got, &x, &want, n, 1e-6, "Q4_K head");
}
