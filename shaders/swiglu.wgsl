// Gate and up projections in one pass, then SwiGLU: h = silu(x Wg^T) * (x Wu^T).
// Where gate and up share a type (GATE_ROWS and UP_ROWS), W interleaves their rows (row 2i =
// gate i, row 2i+1 = up i), so each output pair is (gate_i, up_i). Where they differ, W is
// [Wg; Wu], each in its own type, one dispatch per part: a gate part (GATE_ROWS only) stores
// its outputs to h as they are, and the up part's dispatch after it (UP_ROWS only) replaces
// them with silu(gate) * up.
// GELU_TANH: the gate's activation is GELU with its tanh approximation (GeGLU, Gemma) instead
// of silu.
// Constants: INTER (intermediate size, h's row stride), ROW_LO (this part's first row of W),
// GATE_ROWS, UP_ROWS, GELU_TANH.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<XElem>;
@group(0) @binding(2) var<storage, read> w: array<WElem>;
@group(0) @binding(3) var<storage, read_write> h: array<f32>;
// h as f16 rows too where the down projection reads them (binding 7): lib/out_f16 or
// lib/out_f16_none.

// silu(v), or with GELU_TANH 0.5 v (1 + tanh(sqrt(2 / pi) (v + 0.044715 v^3))) as PyTorch's
// gelu(approximate="tanh"); tanh from exp of a non-positive argument, which cannot overflow.
fn act(v: f32) -> f32 {
    if (GELU_TANH) {
        let u = 0.7978845608028654 * (v + 0.044715 * v * v * v);
        let e = exp(-2.0 * abs(u));
        return 0.5 * v * (1.0 + sign(u) * (1.0 - e) / (1.0 + e));
    }
    return v / (1.0 + exp(-v));
}

// A gate part's outputs are not h yet: only finished values get their f16 copy (store_f16).
fn store_pair(m: u32, n: u32, v0: f32, v1: f32) {
    if (GATE_ROWS && UP_ROWS) {
        let i = m * INTER + (ROW_LO + n) / 2u;
        let v = act(v0) * v1;
        h[i] = v;
        store_f16(i, v);
    } else if (GATE_ROWS) {
        let i = m * INTER + ROW_LO + n;
        h[i] = v0;
        h[i + 1u] = v1;
    } else {
        let i = m * INTER + ROW_LO - INTER + n;
        let a = act(h[i]) * v0;
        let b = act(h[i + 1u]) * v1;
        h[i] = a;
        h[i + 1u] = b;
        store_f16(i, a);
        store_f16(i + 1u, b);
    }
}
