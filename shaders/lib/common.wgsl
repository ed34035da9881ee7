// Per-step values every kernel may read: written once per submit, never a new buffer.
struct Step {
    n_tokens: u32,  // rows (tokens) in this step, of any number of sequences
    n_out: u32,     // rows whose logits the step computes (lib/plan: out_row)
    pad0: u32,
    pad1: u32,
}

// Eight consecutive values (one 16-byte f16 load; the GEMV core's unit of work).
struct W8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn dot8(a: W8, b: W8) -> f32 {
    return dot(a.lo, b.lo) + dot(a.hi, b.hi);
}

// Thirty-two consecutive values of x and their sum: one block of the 32-value quantized types
// (lib/linear_gemv_rows' unit of work, for the weight pieces' w_dot32).
struct X32 {
    v0: W8,
    v1: W8,
    v2: W8,
    v3: W8,
    sum: f32,
}

// The four low (shift 0) or high (shift 4) nibbles of the bytes of q, as values.
fn nibbles4(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(q) >> (vec4<u32>(0u, 8u, 16u, 24u) + shift)) & vec4<u32>(15u));
}

// sum_i q_i * x[i] over a block of 32 nibbles in ggml's 4-bit layout (Q4_0, Q4_1): word i
// holds values 4i .. 4i + 3 in its low nibbles and 16 + 4i .. 19 + 4i in its high ones.
fn nibbles_dot32(q0: u32, q1: u32, q2: u32, q3: u32, x: X32) -> f32 {
    return dot(nibbles4(q0, 0u), x.v0.lo) + dot(nibbles4(q1, 0u), x.v0.hi) + dot(nibbles4(q2, 0u), x.v1.lo)
        + dot(nibbles4(q3, 0u), x.v1.hi) + dot(nibbles4(q0, 4u), x.v2.lo) + dot(nibbles4(q1, 4u), x.v2.hi)
        + dot(nibbles4(q2, 4u), x.v3.lo) + dot(nibbles4(q3, 4u), x.v3.hi);
}
