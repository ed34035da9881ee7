// Sum over each aligned group of LANES invocations with subgroup operations. Where a group fits
// in the smallest subgroup (SHUFFLE) a butterfly of shuffles does it without a barrier;
// otherwise each subgroup adds its values and lane 0 adds its group's subgroup sums through
// workgroup memory. The result is valid in the group's lane 0.
var<workgroup> red: array<vec4<f32>, WG_THREADS>;

fn lanes_sum(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    if (SHUFFLE) {
        var s = v;
        for (var o = LANES / 2u; o > 0u; o >>= 1u) {
            s += subgroupShuffleXor(s, o);
        }
        return s;
    }
    let s = subgroupAdd(v);
    let size = subgroupAdd(1u);
    red[lid] = s;
    workgroupBarrier();
    var t = vec4<f32>(0.0);
    if (lane == 0u) {
        for (var j = 0u; j < LANES; j += size) {
            t += red[lid + j];
        }
    }
    workgroupBarrier();
    return t;
}

// For many sums at once with one barrier (lib/linear_gemv_batch): a lane group is cut into
// lanes_parts() parts of consecutive lanes, lanes_part gives each part's sum in its first lane,
// and the caller adds the parts after its barrier. A group that fits in a subgroup is one part
// (a butterfly of shuffles); a larger one has a part per subgroup, at most MAX_PARTS
// (SG_MIN: the smallest subgroup size).
const MAX_PARTS: u32 = select(LANES / SG_MIN, 1u, SHUFFLE);

fn lanes_parts() -> u32 {
    if (SHUFFLE) {
        return 1u;
    }
    return LANES / subgroupAdd(1u);
}

fn lanes_part(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    if (SHUFFLE) {
        var s = v;
        for (var o = LANES / 2u; o > 0u; o >>= 1u) {
            s += subgroupShuffleXor(s, o);
        }
        return s;
    }
    return subgroupAdd(v);
}
