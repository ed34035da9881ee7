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
