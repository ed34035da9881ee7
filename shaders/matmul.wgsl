// y = x @ W^T for a weight W[N, K], optionally added onto y (fused residual add).
// The core loop comes from lib/linear_tiled.wgsl (prefill) or lib/linear_gemv.wgsl (decode).
// Constants: ACCUMULATE (y += instead of y =), Y_STRIDE and N_OFFSET (where this weight part's
// columns land in y when a large weight is split into several bindings).
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<XElem>;
@group(0) @binding(2) var<storage, read> w: array<WElem>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

fn store_one(m: u32, n: u32, v: f32) {
    let i = m * Y_STRIDE + N_OFFSET + n;
    if (ACCUMULATE) {
        y[i] += v;
    } else {
        y[i] = v;
    }
}

fn store_pair(m: u32, n: u32, v0: f32, v1: f32) {
    store_one(m, n, v0);
    if (n + 1u < N) {
        store_one(m, n + 1u, v1);
    }
}
