// The attention kernels' last step: each of PARTS thread groups holds a partial weighted sum of
// V for dimension lid % HD; add them and write o = sum / denominator.
var<workgroup> partial: array<f32, WG_THREADS>;

fn combine_parts(lid: u32, acc: f32, denominator: f32, qo: u32) {
    partial[lid] = acc;
    workgroupBarrier();
    if (lid < HD) {
        var total = 0.0;
        for (var g = 0u; g < PARTS; g++) {
            total += partial[g * HD + lid];
        }
        o[qo + lid] = total / denominator;
    }
}
