use super::common::*;
use wginfer::gpu::{Gpu, GpuOptions};
use wginfer::ops::input_f16::InputF16;
use wginfer::ops::linear::{
    x_f16_bytes, BoundLinear, Core, F16Rows, GemvShape, InputNorm, LinearConfig, LinearKernels, LinearShape, Rows,
    GEMV_BATCH_ROWS, GEMV_MAX_ROWS, GEMV_REACH_ROWS, GEMV_WIDE_ROWS,
};
use wginfer::ops::matmul::{self, Matmul};
use wginfer::ops::{Step, Weight, WeightType};

/// The portable variant, and the adapter's variant (subgroups, tensor cores where it has them)
/// at the heuristic GEMV shapes and at GEMV shapes whose lane groups fit in one subgroup or span
/// several, or (8-lane subgroups) one lane per row with four rows each; where the adapter has
/// tensor cores, also its tiled core without them.
pub fn configs(gpu: &Gpu) -> Vec<LinearConfig> {
    let adapter = LinearConfig::for_adapter(&gpu.caps);
    let mut v = vec![LinearConfig::default(), adapter];
    if adapter.coop.is_some() {
        v.push(LinearConfig { coop: None, ..adapter });
    }
    for (lanes, rows, threads) in [(4, 1, 8), (8, 4, 64), (64, 2, 128), (256, 2, 256)] {
        v.push(LinearConfig { gemv: Some(GemvShape { lanes, rows, threads }), ..adapter });
    }
    if adapter.has_rows_core() {
        v.push(LinearConfig { gemv: Some(GemvShape { lanes: 1, rows: 4, threads: 8 }), ..adapter });
    }
    v
}

fn check(gpu: &Gpu, ty: WeightType, rows: usize, k: usize, n: usize, accumulate: bool) {
    // A forced one-lane-per-row shape runs whole 32-value blocks only.
    for cfg in configs(gpu).into_iter().filter(|c| c.gemv_runs(k as u32)) {
        check_with(gpu, &cfg, ty, rows, k, n, accumulate);
    }
}

fn check_with(gpu: &Gpu, cfg: &LinearConfig, ty: WeightType, rows: usize, k: usize, n: usize, accumulate: bool) {
    let x = random(rows * k, 1);
    let (w, w_host) = match ty {
        WeightType::Q8_0 => q8_0_weight(gpu, n, k, &random(n * k, 2)),
        _ => weight(gpu, ty, n, k, &random(n * k, 2)),
    };
    let y0 = random(rows * n, 3);
    let (xb, yb, sb) = (upload(gpu, &x), upload(gpu, &y0), step(gpu, rows as u32));
    let mm = Matmul::new(gpu, cfg, &w, &sb, &xb, &yb, accumulate, Rows::Tokens).unwrap();
    gpu.run_pass(|p| mm.record(p, rows as u32)).unwrap();
    let mut want = matmul_ref(&x, &w_host, rows, k, n);
    if accumulate {
        want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
    }
    // Tensor cores multiply in f16: x is rounded too, an error that grows with the root of k.
    // A prefill core over a quantized weight's f16 copy (`Core::PrefillCopy`) rounds the weight.
    let copy = w.parts.iter().any(|p| {
        let shape = LinearShape { k: k as u32, n: p.rows, rows: Rows::Tokens, norm_eps: None, layout: p.layout };
        cfg.dequant_once_for(ty, &shape)
    });
    let f16 = (cfg.coop_for(ty, k as u32, n as u32).is_some() || copy) && rows as u32 > GEMV_MAX_ROWS;
    let tol = if f16 { 1e-2 * (k as f32 / 256.0).sqrt().max(1.0) } else { 1e-4 };
    assert_close(&read(gpu, &yb, rows * n), &want, tol, &format!("matmul {ty:?} {cfg:?} rows={rows} k={k} n={n}"));
}

/// A Q8_0 weight quantized from `data` (`q8_0_bytes`), with the values it holds.
fn q8_0_weight(gpu: &Gpu, rows: usize, cols: usize, data: &[f32]) -> (Weight, Vec<f32>) {
    let (bytes, values) = q8_0_bytes(data);
    (Weight::upload(gpu, "w", WeightType::Q8_0, rows, cols, &bytes).unwrap(), values)
}

/// y += (x, RMS-normalized on load with `norm`) W^T through one kernel for every row count a
/// step can have up to one row past the GEMV cores, so each core runs (`BoundLinear::core_for`):
/// the one-row GEMV, the GEMV that reads each weight once for several rows, the prefill core;
/// past GEMV_MAX_ROWS the widest GEMV core too, which small weights keep on tensor cores.
/// Rows past the step's must keep their old y (a GEMV core stores only rows that exist).
fn check_rows(gpu: &Gpu, cfg: &LinearConfig, ty: WeightType, k: usize, n: usize, norm: bool) {
    let max_rows = GEMV_REACH_ROWS as usize + 1;
    let (x, gamma, y0) = (random(max_rows * k, 1), random(k, 4), random(max_rows * n, 3));
    let data = random(n * k, 2);
    let (w, w_host) = match ty {
        WeightType::Q8_0 => q8_0_weight(gpu, n, k, &data),
        _ => weight(gpu, ty, n, k, &data),
    };
    let (xb, gb, yb, sb) = (upload(gpu, &x), upload(gpu, &gamma), upload(gpu, &y0), Step::buffer(gpu).unwrap());
    let eps = 1e-5;
    let layout = w.single().unwrap().layout;
    let shape = LinearShape { k: k as u32, n: n as u32, rows: Rows::Tokens, norm_eps: norm.then_some(eps), layout };
    let kernels = || LinearKernels::new(gpu, "matmul", &matmul::defs(true, n as u32, 0), ty, &shape, cfg).unwrap();
    let input_norm = norm.then_some(InputNorm { weight: &gb, eps });
    let buffers = [&sb, &xb, &w.single().unwrap().buffer, &yb];
    let op = BoundLinear::new(gpu, kernels(), &buffers, input_norm, F16Rows::default()).unwrap();
    // On tensor cores, without a norm, the same kernel reading x's f16 rows as written before
    // it (`F16Rows::x`, here by input_f16 itself) must give the same bits on every core.
    let x16 = (!norm && cfg.coop.is_some()).then(|| gpu.storage("x f16", x_f16_bytes(&xb, k as u32)).unwrap());
    let op16 = x16.as_ref().map(|x16| {
        let convert = InputF16::new(gpu, k as u32, &xb, x16, None).unwrap();
        gpu.run_pass(|p| convert.record(p, max_rows as u32)).unwrap();
        BoundLinear::new(gpu, kernels(), &buffers, None, F16Rows { x: Some(x16), out: None }).unwrap()
    });
    let input = if norm { rmsnorm_ref(&x, &gamma, eps) } else { x.clone() };
    let product = matmul_ref(&input, &w_host, max_rows, k, n);
    // Every variant's rows, the widest twice over (a partial second grid z, then whole), the
    // first row count past the GEMV cores, and the last and first past a small weight's reach.
    let (widest, gemv_max, reach) = (GEMV_WIDE_ROWS as usize, GEMV_MAX_ROWS as usize, GEMV_REACH_ROWS as usize);
    for rows in (1..=widest + 1).chain([gemv_max, gemv_max + 1, reach, reach + 1]) {
        let wide = (rows > gemv_max).then_some(Core::GemvBatch(GEMV_WIDE_ROWS));
        let core = op.core_for(rows as u32);
        for core in std::iter::once(core).chain(wide.filter(|&w| w != core)) {
            Step { n_tokens: rows as u32, n_out: 1, pad: [0; 2] }.write(gpu, &sb);
            gpu.queue.write_buffer(&yb, 0, bytemuck::cast_slice(&y0));
            gpu.run_pass(|p| op.record_core(p, core, rows as u32)).unwrap();
            let mut want = y0.clone();
            want[..rows * n].iter_mut().zip(&product).for_each(|(a, b)| *a += b);
            let tensor = !core.is_gemv() && cfg.coop_for(ty, k as u32, n as u32).is_some();
            let what = format!("{ty:?} {cfg:?} norm={norm} k={k} n={n} rows={rows} ({core:?})");
            let got = read(gpu, &yb, max_rows * n);
            assert_close(&got, &want, if tensor { 1e-2 } else { 1e-4 }, &what);
            if let Some(op16) = &op16 {
                gpu.queue.write_buffer(&yb, 0, bytemuck::cast_slice(&y0));
                gpu.run_pass(|p| op16.record_core(p, core, rows as u32)).unwrap();
                let same = read(gpu, &yb, max_rows * n).iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(same, "{what}: x's f16 rows written before the kernel changed its outputs");
            }
        }
    }
}

#[test]
fn every_gemv_row_count_matches_cpu() {
    let mut cores: Vec<Core> = (1..=GEMV_MAX_ROWS + 1).map(Core::for_rows).collect();
    cores.dedup();
    let batch = GEMV_BATCH_ROWS.map(Core::GemvBatch);
    assert_eq!(cores, [&[Core::Gemv][..], &batch, &[Core::Prefill]].concat(), "the row counts run every core");
    // One workgroup with a partial output pair and lanes past k; several workgroups with a
    // partial last chunk of k (Q8_0 needs whole blocks of 32). Every lane-group reduction with
    // f16 weights; the other types (w_load8 is all they change) with the adapter's.
    let gpu = gpu();
    let adapter = LinearConfig::for_adapter(&gpu.caps);
    let cases = configs(gpu).into_iter().map(|c| (c, WeightType::F16));
    let cases: Vec<_> = cases.chain([WeightType::F32, WeightType::Q8_0].map(|t| (adapter, t))).collect();
    for (k, n) in [(96, 9), (2080, 70)] {
        for &(cfg, ty) in &cases {
            for norm in [false, true] {
                check_rows(gpu, &cfg, ty, k, n, norm);
            }
        }
    }
}

#[test]
fn every_row_count_on_the_portable_path() {
    // No SHADER_F16, no subgroups: what wgpu's GL backend offers.
    let gpu = Gpu::new(&GpuOptions { portable: true, ..Default::default() }).unwrap();
    assert!(!gpu.caps.shader_f16 && !gpu.caps.subgroup);
    for norm in [false, true] {
        check_rows(&gpu, &LinearConfig::for_adapter(&gpu.caps), WeightType::F16, 2080, 70, norm);
    }
}

#[test]
fn tiled_rows_match_cpu() {
    for ty in [WeightType::F32, WeightType::F16] {
        check(gpu(), ty, 67, 40, 70, false);
        check(gpu(), ty, 130, 88, 131, true);
        // Whole 16 x 16 fragments (the tensor-core core where the adapter has it), with partial
        // row and column tiles.
        check(gpu(), ty, 67, 48, 80, false);
        check(gpu(), ty, 130, 96, 144, true);
        // A wide weight: hundreds of column tiles, the last one partial.
        check(gpu(), ty, 67, 32, 4112, true);
    }
}

#[test]
fn few_rows_on_whole_fragments_match_cpu() {
    // Steps past the GEMV cores on weights of whole 16 x 16 fragments: `Core::Split` where the
    // adapter has tensor cores (a long k, a partial last tile of outputs), f16 weights read as
    // they lie and Q8_0 dequantized through workgroup memory.
    for ty in [WeightType::F16, WeightType::Q8_0] {
        for rows in [GEMV_MAX_ROWS as usize + 1, 33, 64, 200] {
            check(gpu(), ty, rows, 2080, 80, rows == 33);
        }
    }
}

#[test]
fn few_tiles_of_long_rows_match_cpu() {
    // A prefill step of few tiles (5 x 2 on tensor cores) and long rows: the staged core splits
    // its k over 8 workgroups a tile (lib/split_k), Q8_0 over its f16 copy.
    for ty in [WeightType::F16, WeightType::Q8_0] {
        check(gpu(), ty, 300, 2080, 80, true);
    }
}

/// Which tensor-core prompt steps split k over workgroups (bench tables show it as "k/N"), as
/// measured best on the H200 (docs/PERF.md): Qwen2.5-0.5B's down and o projections at 512 rows
/// (112 tiles each) in 2, not its qkv (144 tiles) nor gate/up (1216).
#[test]
fn prefill_core_splits_few_tiles_of_long_rows() {
    let cfg = LinearConfig { coop: Some(32), coop_split: true, ..Default::default() };
    let label = |k, n, rows| cfg.core_label(WeightType::F16, k, n, Core::Prefill, rows);
    assert_eq!(label(4864, 896, 512), ("coop", "k/2".to_string()));
    assert_eq!(label(896, 896, 512), ("coop", "k/2".to_string()));
    assert_eq!(label(896, 1152, 512), ("coop", "-".to_string()));
    assert_eq!(label(896, 9728, 512), ("coop", "-".to_string()));
    let copy = cfg.core_label(WeightType::Q4_0, 4864, 896, Core::PrefillCopy, 512);
    assert_eq!(copy, ("coop", "f16 copy k/2".to_string()));
}

/// Which weights keep the widest GEMV core past GEMV_MAX_ROWS rows: on tensor cores only, and
/// only small ones (docs/PERF.md, H100: Qwen2.5-0.5B's qkv and o up to 32 rows, not gate/up or
/// down).
#[test]
fn small_weights_keep_gemv_past_its_rows_on_tensor_cores() {
    let coop = LinearConfig { coop: Some(32), ..Default::default() };
    let reach = |cfg: &LinearConfig, ty, k, n| cfg.gemv_rows_for(ty, k, n);
    assert_eq!(reach(&coop, WeightType::F16, 896, 1152), GEMV_REACH_ROWS);
    assert_eq!(reach(&coop, WeightType::Q8_0, 896, 896), GEMV_REACH_ROWS);
    assert_eq!(reach(&coop, WeightType::F16, 896, 9728), GEMV_MAX_ROWS);
    assert_eq!(reach(&coop, WeightType::F16, 4864, 896), GEMV_MAX_ROWS);
    // No tensor cores for f32 weights, for partial fragments, or on the adapter.
    assert_eq!(reach(&coop, WeightType::F32, 896, 896), GEMV_MAX_ROWS);
    assert_eq!(reach(&coop, WeightType::F16, 896, 70), GEMV_MAX_ROWS);
    assert_eq!(reach(&LinearConfig::default(), WeightType::F16, 896, 896), GEMV_MAX_ROWS);
}

#[test]
fn weight_split_over_bindings_matches_cpu() {
    // 1 KiB bindings: a [70, 40] f32 weight (160 B rows) becomes 12 parts.
    let gpu = small_binding_gpu();
    let (w, _) = weight(gpu, WeightType::F32, 70, 40, &random(70 * 40, 2));
    assert_eq!(w.parts.len(), 12);
    check(gpu, WeightType::F32, 1, 40, 70, false);
    check(gpu, WeightType::F16, 67, 40, 70, true);
    // 64 columns: 4-row parts, each grouped by rows where the adapter groups linear weights.
    check(gpu, WeightType::F32, 3, 64, 70, false);
}

#[test]
fn gemv_over_more_than_65535_workgroups() {
    // 140,000 outputs at 2 rows per workgroup: a 2-D grid.
    let gpu = gpu();
    let cfg = LinearConfig { gemv: Some(GemvShape { lanes: 128, rows: 1, threads: 256 }), ..Default::default() };
    check_with(gpu, &cfg, WeightType::F32, 1, 8, 140_000, false);
}
