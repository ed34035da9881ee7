// Sums over each aligned group of LANES invocations through workgroup memory (a tree of
// barriers), with the interface of lib/lanes_subgroup: one part per lane group, its sum in the
// group's lane 0.
var<workgroup> red: array<vec4<f32>, WG_THREADS>;

const MAX_PARTS: u32 = 1u;

fn lanes_part(lid: u32, lane: u32, v: vec4<f32>) -> vec4<f32> {
    red[lid] = v;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
        if (lane < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    return red[lid];
}
