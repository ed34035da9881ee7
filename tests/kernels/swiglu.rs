use super::common::*;
use wginfer::model::config::Activation;
use wginfer::ops::linear::{InputNorm, LinearConfig, GEMV_MAX_ROWS};
use wginfer::ops::swiglu::{interleaved_row_order, SwiGlu};
use wginfer::ops::weight::gather_rows;
use wginfer::ops::{Weight, WeightType};

/// PyTorch's gelu(approximate="tanh") (Gemma's gelu_pytorch_tanh), in f64.
fn gelu_tanh(g: f32) -> f32 {
    let g = f64::from(g);
    let u = (2.0 / std::f64::consts::PI).sqrt() * (g + 0.044715 * g * g * g);
    (0.5 * g * (1.0 + u.tanh())) as f32
}

#[test]
fn gate_up_silu_and_gelu_match_cpu_with_and_without_the_fused_norm() {
    let gpu = gpu();
    // 70 rows span two 64-row tiles of the prefill core.
    let cases = [(1usize, false, Activation::Silu), (70, false, Activation::Silu), (3, true, Activation::Silu)];
    let gelu = [(1, true, Activation::GeluTanh), (5, false, Activation::GeluTanh), (70, true, Activation::GeluTanh)];
    for (rows, fused_norm, act) in cases.into_iter().chain([(70, true, Activation::Silu)]).chain(gelu) {
        let (k, inter) = (48, 75);
        let x: Vec<f32> = random(rows * k, 10).iter().map(|v| v * 5.0).collect();
        let gamma = random(k, 12);
        let stacked = random(2 * inter * k, 11); // [gate; up]
        let fused = gather_rows(bytemuck::cast_slice(&stacked), k * 4, &interleaved_row_order(inter));
        let w = Weight::upload(gpu, "gate_up", WeightType::F32, 2 * inter, k, &fused).unwrap();
        let (xb, gb, hb, sb) = (upload(gpu, &x), upload(gpu, &gamma), zeros(gpu, rows * inter), step(gpu, rows as u32));
        let norm = fused_norm.then_some(InputNorm { weight: &gb, eps: 1e-5 });
        // Where the adapter has f16, h is written as f16 rows too in steps past the GEMV cores'
        // rows (the down projection's tensor-core input).
        let h16 =
            gpu.caps.shader_f16.then(|| gpu.storage("h f16", (rows * inter * 2).next_multiple_of(4) as u64).unwrap());
        let cfg = LinearConfig::for_adapter(&gpu.caps);
        let op = SwiGlu::new(gpu, &cfg, &w, &sb, &xb, (&hb, h16.as_ref()), norm, act).unwrap();
        gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
        let input = if fused_norm { rmsnorm_ref(&x, &gamma, 1e-5) } else { x.clone() };
        let gate = matmul_ref(&input, &stacked[..inter * k], rows, k, inter);
        let up = matmul_ref(&input, &stacked[inter * k..], rows, k, inter);
        let f = |g: f32| match act {
            Activation::Silu => g / (1.0 + (-g).exp()),
            Activation::GeluTanh => gelu_tanh(g),
        };
        let want: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| f(*g) * u).collect();
        let what = format!("swiglu rows={rows} norm={fused_norm} {act:?}");
        assert_close(&read(gpu, &hb, rows * inter), &want, 1e-4, &what);
        if let (Some(h16), true) = (&h16, rows as u32 > GEMV_MAX_ROWS) {
            assert_f16_copy_of(gpu, &hb, h16, rows * inter, &what);
        }
    }
}
