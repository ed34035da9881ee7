// Sum over each aligned group of LANES invocations with subgroup shuffles. A group is cut into
// parts of PART = min(LANES, SG_MIN) consecutive lanes, each inside one subgroup (SG_MIN: the
// smallest subgroup size), summed by a butterfly of xor shuffles without a barrier; where a
// group spans several parts (not SHUFFLE) their sums meet through workgroup memory. The part
// count is a constant, so the loops over parts unroll: with subgroupAdd and a part count read
// at run time (LANES / subgroupAdd(1)), 8 rows of the normalized 1152x896 weight took 10.1 us
// on the H200 against 7.4 (docs/PERF.md).
const PART: u32 = min(LANES, SG_MIN);
var<workgroup> red: array<vec4<f32>, WG_THREADS>;

// The sum of v over this lane's part, in every lane of the part.
fn part_sum(v: vec4<f32>) -> vec4<f32> {
    var s = v;
    for (var o = PART / 2u; o > 0u; o >>= 1u) {
        s += subgroupShuffleXor(s, o);
    }
    return s;
}

// The result is valid in the group's lane 0.
fn lanes_sum(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    let s = part_sum(v);
    if (SHUFFLE) {
        return s;
    }
    red[lid] = s;
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    if (lane == 0u) {
        for (var j = 0u; j < LANES; j += PART) {
            t += red[lid + j];
        }
    }
    workgroupBarrier();
    return t;
}

// For many sums at once with one barrier (lib/linear_gemv_batch): lanes_part gives each of a
// lane group's MAX_PARTS parts its sum in its first lane (lane % (LANES / MAX_PARTS) == 0), and
// the caller adds the parts after its barrier.
const MAX_PARTS: u32 = LANES / PART;

fn lanes_part(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    return part_sum(v);
}
