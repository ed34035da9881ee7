// RMSNorm with f32 accumulation: y[r] = x[r] / sqrt(mean(x[r]^2) + EPS) * gamma.
// One workgroup per row; LAST_ROW_ONLY normalizes only the step's last row into y row 0
// (the final norm before the LM head). Constants: D, EPS, LAST_ROW_ONLY, WG_THREADS.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = select(wg.x, step.n_tokens - 1u, LAST_ROW_ONLY);
    let xo = row * D;
    let yo = select(xo, 0u, LAST_ROW_ONLY);
    var ss = 0.0;
    for (var i = lid; i < D; i += WG_THREADS) {
        let v = x[xo + i];
        ss += v * v;
    }
    let inv = inverseSqrt(wg_sum(lid, ss) / f32(D) + EPS);
    for (var i = lid; i < D; i += WG_THREADS) {
        y[yo + i] = x[xo + i] * inv * gamma[i];
    }
}
