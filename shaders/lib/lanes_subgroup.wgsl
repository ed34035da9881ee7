// Sum over each aligned group of LANES invocations with subgroup operations (one barrier).
// The host picks this piece only when subgroups are at most LANES wide, so a group is
// LANES / size consecutive subgroups. The result is valid in the group's lane 0.
var<workgroup> red: array<f32, WG_THREADS>;

fn lanes_sum(lid: u32, lane: u32, v: f32) -> f32 {
    let s = subgroupAdd(v);
    let size = subgroupAdd(1u);
    red[lid] = s;
    workgroupBarrier();
    var t = 0.0;
    if (lane == 0u) {
        for (var j = 0u; j < LANES; j += size) {
            t += red[lid + j];
        }
    }
    return t;
}
