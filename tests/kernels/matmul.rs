use super::common::*;
use wginfer::gpu::Gpu;
use wginfer::ops::linear::{GemvShape, LinearConfig, Rows, GEMV_MAX_ROWS};
use wginfer::ops::matmul::Matmul;
use wginfer::ops::WeightType;

/// The portable variant, and the adapter's variant (subgroups, tensor cores where it has them)
/// at the heuristic GEMV shapes and at GEMV shapes whose lane groups fit in one subgroup or span
/// several; where the adapter has tensor cores, also its tiled core without them.
pub fn configs(gpu: &Gpu) -> Vec<LinearConfig> {
    let adapter = LinearConfig::for_adapter(&gpu.caps);
    let mut v = vec![LinearConfig::default(), adapter];
    if adapter.coop.is_some() {
        v.push(LinearConfig { coop: None, ..adapter });
    }
    for (lanes, rows, threads) in [(4, 1, 8), (8, 4, 64), (64, 2, 128), (256, 2, 256)] {
        v.push(LinearConfig { gemv: Some(GemvShape { lanes, rows, threads }), ..adapter });
    }
    v
}

fn check(gpu: &Gpu, ty: WeightType, rows: usize, k: usize, n: usize, accumulate: bool) {
    for cfg in configs(gpu) {
        check_with(gpu, &cfg, ty, rows, k, n, accumulate);
    }
}

fn check_with(gpu: &Gpu, cfg: &LinearConfig, ty: WeightType, rows: usize, k: usize, n: usize, accumulate: bool) {
    let x = random(rows * k, 1);
    let (w, w_host) = weight(gpu, ty, n, k, &random(n * k, 2));
    let y0 = random(rows * n, 3);
    let (xb, yb, sb) = (upload(gpu, &x), upload(gpu, &y0), step(gpu, rows as u32));
    let mm = Matmul::new(gpu, cfg, &w, &sb, &xb, &yb, accumulate, Rows::Tokens).unwrap();
    gpu.run_pass(|p| mm.record(p, rows as u32)).unwrap();
    let mut want = matmul_ref(&x, &w_host, rows, k, n);
    if accumulate {
        want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
    }
    // Tensor cores multiply in f16: x is rounded too.
    let tol = if cfg.coop_for(ty, k as u32, n as u32).is_some() && rows as u32 > GEMV_MAX_ROWS { 1e-2 } else { 1e-4 };
    assert_close(&read(gpu, &yb, rows * n), &want, tol, &format!("matmul {ty:?} {cfg:?} rows={rows} k={k} n={n}"));
}

#[test]
fn gemv_rows_match_cpu() {
    for ty in [WeightType::F32, WeightType::F16] {
        check(gpu(), ty, 1, 40, 70, false);
        check(gpu(), ty, 3, 104, 9, true);
        check(gpu(), ty, 1, 2056, 33, true);
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
fn weight_split_over_bindings_matches_cpu() {
    // 1 KiB bindings: a [70, 40] f32 weight (160 B rows) becomes 12 parts.
    let gpu = small_binding_gpu();
    let (w, _) = weight(gpu, WeightType::F32, 70, 40, &random(70 * 40, 2));
    assert_eq!(w.parts.len(), 12);
    check(gpu, WeightType::F32, 1, 40, 70, false);
    check(gpu, WeightType::F16, 67, 40, 70, true);
}

#[test]
fn gemv_over_more_than_65535_workgroups() {
    // 140,000 outputs at 2 rows per workgroup: a 2-D grid.
    let gpu = gpu();
    let cfg = LinearConfig { gemv: Some(GemvShape { lanes: 128, rows: 1, threads: 256 }), ..Default::default() };
    check_with(gpu, &cfg, WeightType::F32, 1, 8, 140_000, false);
}
