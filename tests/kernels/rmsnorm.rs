use super::common::*;
use wginfer::ops::rmsnorm::{NormBuffers, NormRows, RmsNorm};

#[test]
fn rows_match_cpu() {
    let gpu = gpu();
    let (rows, d) = (5, 300);
    let x: Vec<f32> = random(rows * d, 4).iter().map(|v| v * 30.0).collect();
    let g = random(d, 5);
    let (xb, gb, yb) = (upload(gpu, &x), upload(gpu, &g), zeros(gpu, rows * d));
    let bufs = NormBuffers { x: &xb, gamma: &gb, y: &yb };
    let k = RmsNorm::new(gpu, d as u32, 1e-6, NormRows::All, &bufs).unwrap();
    gpu.run_pass(|p| k.record(p, rows as u32)).unwrap();
    assert_close(&read(gpu, &yb, rows * d), &rmsnorm_ref(&x, &g, 1e-6), 1e-5, "rmsnorm");
}

/// A post-norm (Gemma): each row's norm is added onto what y holds.
#[test]
fn rows_added_onto_y() {
    let gpu = gpu();
    let (rows, d) = (3, 96);
    let (x, g, y0) = (random(rows * d, 14), random(d, 15), random(rows * d, 16));
    let (xb, gb, yb) = (upload(gpu, &x), upload(gpu, &g), upload(gpu, &y0));
    let bufs = NormBuffers { x: &xb, gamma: &gb, y: &yb };
    let k = RmsNorm::new(gpu, d as u32, 1e-6, NormRows::AddAll, &bufs).unwrap();
    gpu.run_pass(|p| k.record(p, rows as u32)).unwrap();
    let want: Vec<f32> = rmsnorm_ref(&x, &g, 1e-6).iter().zip(&y0).map(|(n, y)| n + y).collect();
    assert_close(&read(gpu, &yb, rows * d), &want, 1e-5, "rmsnorm added");
}

#[test]
fn output_rows_are_gathered_in_plan_order() {
    // Rows 4, 0 and 2 of a 5-row step produce logits: y rows 0, 1, 2 are their norms.
    let gpu = gpu();
    let (rows, d) = (5, 68);
    let x = random(rows * d, 6);
    let g = random(d, 7);
    let outs = [4u32, 0, 2];
    let (xb, gb, yb) = (upload(gpu, &x), upload(gpu, &g), zeros(gpu, outs.len() * d));
    let plan = test_plan(gpu, &[TestSeq { rows, start: 0, lo: 0, blocks: vec![0] }], 16, &outs, 0);
    let bufs = NormBuffers { x: &xb, gamma: &gb, y: &yb };
    let k = RmsNorm::new(gpu, d as u32, 1e-5, NormRows::Outputs(&plan), &bufs).unwrap();
    gpu.run_pass(|p| k.record(p, outs.len() as u32)).unwrap();
    let want: Vec<f32> = outs.iter().flat_map(|&r| rmsnorm_ref(&x[r as usize * d..][..d], &g, 1e-5)).collect();
    assert_close(&read(gpu, &yb, outs.len() * d), &want, 1e-5, "rmsnorm of the output rows");
}
