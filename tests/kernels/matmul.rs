use super::common::*;
use wginfer::gpu::Gpu;
use wginfer::ops::linear::LinearConfig;
use wginfer::ops::matmul::Matmul;
use wginfer::ops::WeightType;

/// The portable variant, and the subgroup variant where the adapter has subgroups.
pub fn configs(gpu: &Gpu) -> Vec<LinearConfig> {
    let mut v = vec![LinearConfig::default()];
    if gpu.caps.subgroup {
        v.push(LinearConfig { subgroups: true, ..Default::default() });
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
    let (xb, yb, sb) = (upload(gpu, &x), upload(gpu, &y0), step(gpu, rows as u32, 0, 0));
    let mm = Matmul::new(gpu, cfg, &w, &sb, &xb, &yb, accumulate, true).unwrap();
    gpu.run_pass(|p| mm.record(p, rows as u32)).unwrap();
    let mut want = matmul_ref(&x, &w_host, rows, k, n);
    if accumulate {
        want.iter_mut().zip(&y0).for_each(|(a, b)| *a += b);
    }
    assert_close(&read(gpu, &yb, rows * n), &want, 1e-4, &format!("matmul {ty:?} {cfg:?} rows={rows} k={k} n={n}"));
}

#[test]
fn gemv_rows_match_cpu() {
    for ty in [WeightType::F32, WeightType::F16] {
        check(gpu(), ty, 1, 36, 70, false);
        check(gpu(), ty, 3, 100, 9, true);
    }
}

#[test]
fn tiled_rows_match_cpu() {
    for ty in [WeightType::F32, WeightType::F16] {
        check(gpu(), ty, 67, 36, 70, false);
        check(gpu(), ty, 130, 84, 131, true);
    }
}

#[test]
fn weight_split_over_bindings_matches_cpu() {
    // 1 KiB bindings: a [70, 36] f32 weight (144 B rows) becomes 10 parts.
    let gpu = small_binding_gpu();
    let (w, _) = weight(gpu, WeightType::F32, 70, 36, &random(70 * 36, 2));
    assert_eq!(w.parts.len(), 10);
    check(gpu, WeightType::F32, 1, 36, 70, false);
    check(gpu, WeightType::F16, 67, 36, 70, true);
}

#[test]
fn gemv_over_more_than_65535_workgroups() {
    // 140,000 outputs at 2 rows per workgroup: a 2-D grid.
    let gpu = gpu();
    let cfg = wginfer::ops::linear::LinearConfig {
        gemv: wginfer::ops::linear::GemvShape { rows_per_group: 2, lanes: 128 },
        ..Default::default()
    };
    check_with(gpu, &cfg, WeightType::F32, 1, 8, 140_000, false);
}
