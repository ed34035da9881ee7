// RMSNorm with f32 accumulation: y[i] = x[r] / sqrt(mean(x[r]^2) + EPS) * gamma, for x row
// r = norm_row(i): every row (lib/norm_rows_all), or the step's output rows gathered
// (lib/norm_rows_gather), the final norm before the LM head. One workgroup per row. ACCUMULATE:
// y[i] += instead (Gemma's post-norms, added onto the residual).
// Constants: D, EPS, WG_THREADS, ACCUMULATE.
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> gamma: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let xo = norm_row(wg.x) * D;
    let yo = wg.x * D;
    var ss = 0.0;
    for (var i = lid; i < D; i += WG_THREADS) {
        let v = x[xo + i];
        ss += v * v;
    }
    let inv = inverseSqrt(wg_sum(lid, ss) / f32(D) + EPS);
    for (var i = lid; i < D; i += WG_THREADS) {
        let v = x[xo + i] * inv * gamma[i];
        if (ACCUMULATE) {
            y[yo + i] += v;
        } else {
            y[yo + i] = v;
        }
    }
}
