// How the tiled prefill core reads its input rows: RMS-normalized on load, so
// the norm needs no dispatch of its own. prepare_input computes 1 / rms of the workgroup's rows (NORM_ROWS at
// most, NORM_THREADS / NORM_ROWS threads per row, f32 accumulation); load_x4 scales by it and
// by the norm weight. Constants: K, EPS, NORM_ROWS, NORM_THREADS (powers of two).
@group(0) @binding(15) var<storage, read> gamma: array<vec4<f32>>;

const PER_ROW: u32 = NORM_THREADS / NORM_ROWS;

var<workgroup> inv_rms: array<f32, NORM_ROWS>;
var<workgroup> norm_red: array<f32, NORM_THREADS>;

fn prepare_input(lid: u32, m0: u32, count: u32) {
    let r = lid / PER_ROW;
    let j = lid % PER_ROW;
    var ss = 0.0;
    if (r < count) {
        // A constant trip count: the loop unrolls and the loads overlap.
        for (var i = 0u; i < (K / 4u + PER_ROW - 1u) / PER_ROW; i++) {
            let k4 = j + i * PER_ROW;
            if (k4 < K / 4u) {
                let v = x[(m0 + r) * (K / 4u) + k4];
                ss += dot(v, v);
            }
        }
    }
    norm_red[lid] = ss;
    workgroupBarrier();
    for (var s = PER_ROW / 2u; s > 0u; s >>= 1u) {
        if (j < s) {
            norm_red[lid] += norm_red[lid + s];
        }
        workgroupBarrier();
    }
    if (j == 0u) {
        inv_rms[r] = inverseSqrt(norm_red[lid] / f32(K) + EPS);
    }
    workgroupBarrier();
}

fn load_x4(r: u32, m: u32, k: u32) -> vec4<f32> {
    return x[(m * K + k) / 4u] * inv_rms[r] * gamma[k / 4u];
}
