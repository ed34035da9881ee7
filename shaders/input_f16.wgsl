enable f16;
// The input rows of the tensor-core prefill core (lib/linear_coop) as f16, so its A fragments
// load straight from storage: y[r] = x[r], RMS-normalized (f32 accumulation) and scaled by
// gamma when NORM. Values saturate at f16's +-65504 rather than turn into inf. One workgroup
// per row. Constants: K (a multiple of 4), NORM, EPS, WG_THREADS.
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> y: array<vec4<f16>>;
@group(0) @binding(2) var<storage, read> gamma: array<vec4<f32>>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let o = wg.x * (K / 4u);
    var scale = 1.0;
    if (NORM) {
        var ss = 0.0;
        for (var i = lid; i < K / 4u; i += WG_THREADS) {
            let v = x[o + i];
            ss += dot(v, v);
        }
        scale = inverseSqrt(wg_sum(lid, ss) / f32(K) + EPS);
    }
    for (var i = lid; i < K / 4u; i += WG_THREADS) {
        var v = x[o + i] * scale;
        if (NORM) {
            v *= gamma[i];
        }
        y[o + i] = vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
    }
}
