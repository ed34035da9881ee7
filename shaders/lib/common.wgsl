// Per-step values every kernel may read: written once per submit, never a new buffer.
struct Step {
    n_tokens: u32,   // rows (tokens) in this step
    start_pos: u32,  // absolute position of row 0 (RoPE and causal mask)
    kv_lo: u32,      // oldest position still held by the KV ring
    pad: u32,
}

// Eight consecutive values (one 16-byte f16 load; the GEMV core's unit of work).
struct W8 {
    lo: vec4<f32>,
    hi: vec4<f32>,
}

fn dot8(a: W8, b: W8) -> f32 {
    return dot(a.lo, b.lo) + dot(a.hi, b.hi);
}
