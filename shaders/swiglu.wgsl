// Gate and up projections in one pass, then SwiGLU: h = silu(x Wg^T) * (x Wu^T).
// W interleaves the rows of Wg and Wu (row 2i = gate i, row 2i+1 = up i), so each output pair
// is (gate_i, up_i). Constants: N = 2 * intermediate.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<XElem>;
@group(0) @binding(2) var<storage, read> w: array<WElem>;
@group(0) @binding(3) var<storage, read_write> h: array<f32>;

fn store_pair(m: u32, n: u32, gate: f32, up: f32) {
    let silu = gate / (1.0 + exp(-gate));
    h[m * (N / 2u) + n / 2u] = silu * up;
}
