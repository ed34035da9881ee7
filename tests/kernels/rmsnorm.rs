use super::common::*;
use wginfer::ops::rmsnorm::RmsNorm;

#[test]
fn rows_match_cpu() {
    let gpu = gpu();
    let (rows, d) = (5, 300);
    let x: Vec<f32> = random(rows * d, 4).iter().map(|v| v * 30.0).collect();
    let g = random(d, 5);
    let (xb, gb, yb, sb) = (upload(gpu, &x), upload(gpu, &g), zeros(gpu, rows * d), step(gpu, rows as u32, 0, 0));
    let k = RmsNorm::new(gpu, d as u32, 1e-6, false, &sb, &xb, &gb, &yb).unwrap();
    gpu.run_pass(|p| k.record(p, rows as u32)).unwrap();
    assert_close(&read(gpu, &yb, rows * d), &rmsnorm_ref(&x, &g, 1e-6), 1e-5, "rmsnorm");
}

#[test]
fn last_row_only_writes_row_zero() {
    let gpu = gpu();
    let (rows, d) = (3, 68);
    let x = random(rows * d, 6);
    let g = random(d, 7);
    let (xb, gb, yb, sb) = (upload(gpu, &x), upload(gpu, &g), zeros(gpu, d), step(gpu, rows as u32, 0, 0));
    let k = RmsNorm::new(gpu, d as u32, 1e-5, true, &sb, &xb, &gb, &yb).unwrap();
    gpu.run_pass(|p| k.record(p, rows as u32)).unwrap();
    assert_close(&read(gpu, &yb, d), &rmsnorm_ref(&x[2 * d..], &g, 1e-5), 1e-5, "rmsnorm last row");
}
