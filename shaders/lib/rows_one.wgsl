// The rows of x a step gives a one-row core: one, never read from the step (whose binding the
// one-row cores leave out).
fn step_rows() -> u32 {
    return 1u;
}
