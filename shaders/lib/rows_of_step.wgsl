// The rows of x a step gives a core: its tokens, or the rows it computes logits for (an LM head,
// ROWS_FROM_OUTPUTS).
fn step_rows() -> u32 {
    return select(step.n_tokens, step.n_out, ROWS_FROM_OUTPUTS);
}
