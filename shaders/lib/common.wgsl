// Per-step values every kernel may read: written once per submit, never a new buffer.
struct Step {
    n_tokens: u32,   // rows (tokens) in this step
    start_pos: u32,  // absolute position of row 0 (RoPE and causal mask)
    kv_lo: u32,      // oldest position still held by the KV ring
    pad: u32,
}
