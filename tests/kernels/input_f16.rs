use super::common::*;
use wginfer::ops::input_f16::InputF16;
use wginfer::ops::linear::InputNorm;

/// Runs the kernel on `rows` rows of `k` values and reads the f16 rows back as f32.
fn run(x: &[f32], rows: usize, k: usize, gamma: Option<&[f32]>) -> Vec<f32> {
    let gpu = gpu();
    let (xb, yb) = (upload(gpu, x), zeros(gpu, rows * k / 2));
    let gb = gamma.map(|g| upload(gpu, g));
    let norm = gb.as_ref().map(|weight| InputNorm { weight, eps: 1e-6 });
    let op = InputF16::new(gpu, k as u32, &xb, &yb, norm).unwrap();
    gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
    let bytes = gpu.read_back(&yb, (rows * k * 2) as u64).unwrap();
    bytemuck::cast_slice::<u8, half::f16>(&bytes).iter().map(|h| h.to_f32()).collect()
}

#[test]
fn normalized_rows_match_cpu() {
    if !gpu().caps.shader_f16 {
        return; // only the tensor-core path (which needs f16) runs this kernel
    }
    let (rows, k) = (5, 1032);
    let x: Vec<f32> = random(rows * k, 8).iter().map(|v| v * 30.0).collect();
    let g = random(k, 9);
    // f16 keeps 11 significant bits.
    assert_close(&run(&x, rows, k, Some(&g)), &rmsnorm_ref(&x, &g, 1e-6), 2e-3, "input_f16 normalized");
}

#[test]
fn plain_rows_are_rounded_and_saturated() {
    if !gpu().caps.shader_f16 {
        return;
    }
    let (rows, k) = (3, 40);
    let mut x = random(rows * k, 10);
    x[7] = 1e6;
    x[50] = -1e9;
    let want: Vec<f32> = x.iter().map(|v| v.clamp(-65504.0, 65504.0)).collect();
    assert_close(&run(&x, rows, k, None), &want, 2e-3, "input_f16 plain");
}
