use super::common::*;
use wginfer::ops::linear::LinearConfig;
use wginfer::ops::swiglu::{interleaved_row_order, SwiGlu};
use wginfer::ops::weight::gather_rows;
use wginfer::ops::{Weight, WeightType};

#[test]
fn gate_up_silu_matches_cpu() {
    let gpu = gpu();
    for rows in [1usize, 70] {
        let (k, inter) = (44, 75);
        let x = random(rows * k, 10);
        let stacked = random(2 * inter * k, 11); // [gate; up]
        let fused = gather_rows(bytemuck::cast_slice(&stacked), k * 4, &interleaved_row_order(inter));
        let w = Weight::upload(gpu, "gate_up", WeightType::F32, 2 * inter, k, &fused).unwrap();
        let (xb, hb, sb) = (upload(gpu, &x), zeros(gpu, rows * inter), step(gpu, rows as u32, 0, 0));
        let op = SwiGlu::new(gpu, &LinearConfig::for_adapter(&gpu.caps), &w, &sb, &xb, &hb).unwrap();
        gpu.run_pass(|p| op.record(p, rows as u32)).unwrap();
        let gate = matmul_ref(&x, &stacked[..inter * k], rows, k, inter);
        let up = matmul_ref(&x, &stacked[inter * k..], rows, k, inter);
        let want: Vec<f32> = gate.iter().zip(&up).map(|(g, u)| g / (1.0 + (-g).exp()) * u).collect();
        assert_close(&read(gpu, &hb, rows * inter), &want, 1e-4, &format!("swiglu rows={rows}"));
    }
}
