// Workgroup-wide reductions over WG_THREADS invocations (a power of two), in workgroup memory.
var<workgroup> red: array<f32, WG_THREADS>;

fn wg_reduce(lid: u32, v: f32, take_max: bool) -> f32 {
    workgroupBarrier(); // the previous reduction's result has been read by everyone
    red[lid] = v;
    workgroupBarrier();
    for (var s = WG_THREADS / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let o = red[lid + s];
            red[lid] = select(red[lid] + o, max(red[lid], o), take_max);
        }
        workgroupBarrier();
    }
    return red[0];
}

fn wg_sum(lid: u32, v: f32) -> f32 {
    return wg_reduce(lid, v, false);
}

fn wg_max(lid: u32, v: f32) -> f32 {
    return wg_reduce(lid, v, true);
}
