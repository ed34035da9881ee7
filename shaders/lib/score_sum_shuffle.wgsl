// Sum of a score's parts over SCORE_LANES adjacent lanes (a power of two that fits in every
// subgroup) by shuffles: every lane of the group gets the sum. Call in uniform control flow.
fn score_lanes_sum(s: f32) -> f32 {
    var t = s;
    for (var o = SCORE_LANES / 2u; o > 0u; o >>= 1u) {
        t += subgroupShuffleXor(t, o);
    }
    return t;
}
