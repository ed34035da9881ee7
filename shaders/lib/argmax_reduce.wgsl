// Workgroup-wide argmax over WG_THREADS (value, index) candidates: the index of the largest
// value, the lowest index on ties. Every invocation gets the result.
var<workgroup> best_v: array<f32, WG_THREADS>;
var<workgroup> best_i: array<u32, WG_THREADS>;

fn wg_argmax(lid: u32, v: f32, i: u32) -> u32 {
    best_v[lid] = v;
    best_i[lid] = i;
    workgroupBarrier();
    for (var s = WG_THREADS / 2u; s > 0u; s >>= 1u) {
        if (lid < s) {
            let ov = best_v[lid + s];
            let oi = best_i[lid + s];
            if (ov > best_v[lid] || (ov == best_v[lid] && oi < best_i[lid])) {
                best_v[lid] = ov;
                best_i[lid] = oi;
            }
        }
        workgroupBarrier();
    }
    return best_i[0];
}
