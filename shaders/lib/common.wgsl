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
