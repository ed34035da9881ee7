// How the GEMV core reads its input rows: RMS-normalized for free. Its lane group reads all of
// a row of x, so it sums x^2 on the way (ss, the row's total) and scales its dot products of
// (x * gamma) by 1/rms once at the end. Constants: K, EPS. gamma is stored as x is (XElem: four
// values; the rows core's u64 pairs halve its loads on CPU adapters), read through x_vec4.
@group(0) @binding(15) var<storage, read> gamma: array<XElem>;

const NORMED: bool = true;

// Eight values at k (of x, or of a weight row: the dot product is the same) times gamma.
fn gemv_weigh(xr: W8, k: u32) -> W8 {
    return W8(xr.lo * x_vec4(gamma[k / 4u]), xr.hi * x_vec4(gamma[k / 4u + 1u]));
}

// gamma at k .. k + 3 (k % 4 == 0), by which x's values there are weighed.
fn gemv_gamma4(k: u32) -> vec4<f32> {
    return x_vec4(gamma[k / 4u]);
}

fn gemv_scale(ss: f32) -> f32 {
    return inverseSqrt(ss / f32(K) + EPS);
}
