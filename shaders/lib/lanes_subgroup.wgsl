// Sums over each aligned group of LANES invocations with subgroup shuffles. A group is cut into
// parts of PART = min(LANES, SG_MIN) consecutive lanes, each inside one subgroup (SG_MIN: the
// smallest subgroup size), summed by a butterfly of xor shuffles without a barrier; where a
// group spans several parts the caller adds their sums after a barrier. The part count is a
// constant, so the loops over parts unroll: with subgroupAdd and a part count read at run time
// (LANES / subgroupAdd(1)), 8 rows of the normalized 1152x896 weight took 10.1 us on the H200
// against 7.4 (docs/PERF.md).
const PART: u32 = min(LANES, SG_MIN);
const MAX_PARTS: u32 = LANES / PART;

// For many sums at once with one barrier (lib/linear_gemv, lib/linear_gemv_batch): lanes_part
// gives each of a lane group's MAX_PARTS parts its sum in its first lane (lane % (LANES /
// MAX_PARTS) == 0), and the caller adds the parts after its barrier.
fn lanes_part(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    var s = v;
    for (var o = PART / 2u; o > 0u; o >>= 1u) {
        s += subgroupShuffleXor(s, o);
    }
    return s;
}
