// A score computed by one lane (SCORE_LANES = 1): nothing to add; no subgroup operations.
fn score_lanes_sum(s: f32) -> f32 {
    return s;
}
