// Where the GEMV cores' lane-group sums meet: each of a lane group's MAX_PARTS parts (lib/lanes_*)
// leaves its share of a sum in workgroup memory, and after one workgroup barrier whoever stores
// an output adds the shares. Needs from the core: SUMS (vec4 sums a lane group reduces), GROUPS,
// LANES; lanes_part and MAX_PARTS from lib/lanes_*.
// Share q of lane group g's sum i at (i * GROUPS + g) * MAX_PARTS + q.
var<workgroup> parts: array<vec4<f32>, SUMS * GROUPS * MAX_PARTS>;

// Reduces sum i of lane group g (v in each of its lanes) within each part, and leaves the parts'
// shares in workgroup memory.
fn lanes_keep(lid: u32, lane: u32, g: u32, i: u32, v: vec4<f32>) {
    let s = lanes_part(lid, lane, v);
    let part = LANES / MAX_PARTS;
    if (lane % part == 0u) {
        parts[(i * GROUPS + g) * MAX_PARTS + lane / part] = s;
    }
}

// Sum i of lane group g, after lanes_keep in every lane and a workgroup barrier.
fn lanes_total(g: u32, i: u32) -> vec4<f32> {
    var t = vec4<f32>(0.0);
    for (var q = 0u; q < MAX_PARTS; q++) {
        t += parts[(i * GROUPS + g) * MAX_PARTS + q];
    }
    return t;
}
