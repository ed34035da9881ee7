// RMSNorm with f32 accumulation: y[r] = x[r] / sqrt(mean(x[r]^2) + EPS) * gamma.
// One workgroup per row; GATHER normalizes the step's output rows (lib/plan: out_row(i) into
// y row i), the final norm before the LM head. Constants: D, EPS, GATHER, WG_THREADS; with
// GATHER, lib/plan's.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> gamma: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> plan: array<u32>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    var row = wg.x;
    if (GATHER) {
        row = out_row(wg.x);
    }
    let xo = row * D;
    let yo = wg.x * D;
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
