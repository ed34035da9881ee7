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

// A 32-value block of a weight row as d * q + m, q its quants as values (d = 1, m = 0 for types
// read value by value): what the weight pieces' w_block32 gives lib/linear_gemv_rows, which
// takes it apart once and multiplies it with several rows of x.
struct W32 {
    q0: W8,
    q1: W8,
    q2: W8,
    q3: W8,
    d: f32,
    m: f32,
}

// The four low (shift 0) or high (shift 4) nibbles of the bytes of q, as values.
fn nibbles4(q: u32, shift: u32) -> vec4<f32> {
    return vec4<f32>((vec4<u32>(q) >> (vec4<u32>(0u, 8u, 16u, 24u) + shift)) & vec4<u32>(15u));
}

// The four int8s of q as values (Q8_0's quants).
fn i8x4(q: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(q) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// A block of 32 nibbles in ggml's 4-bit layout (Q4_0, Q4_1) as d * q + m: word i holds values
// 4i .. 4i + 3 in its low nibbles and 16 + 4i .. 19 + 4i in its high ones.
fn nibbles_block(q0: u32, q1: u32, q2: u32, q3: u32, d: f32, m: f32) -> W32 {
    return W32(
        W8(nibbles4(q0, 0u), nibbles4(q1, 0u)),
        W8(nibbles4(q2, 0u), nibbles4(q3, 0u)),
        W8(nibbles4(q0, 4u), nibbles4(q1, 4u)),
        W8(nibbles4(q2, 4u), nibbles4(q3, 4u)),
        d,
        m,
    );
}
