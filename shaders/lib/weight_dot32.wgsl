// w_dot32 for weight types without their own: four w_load8s. sum_i W[e + i] * x[i], i < 32
// (e % 32 == 0), for lib/linear_gemv_rows.
fn w_dot32(e: u32, x: X32) -> f32 {
    return dot8(w_load8(e), x.v0) + dot8(w_load8(e + 8u), x.v1) + dot8(w_load8(e + 16u), x.v2)
        + dot8(w_load8(e + 24u), x.v3);
}
