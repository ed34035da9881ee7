// lib/reduce with subgroup operations, for adapters that have them: each subgroup reduces its
// values at once, then every thread combines the subgroups' results from workgroup memory, two
// barriers in all (the tree of lib/reduce takes 2 + log2(WG_THREADS)). Subgroups are taken to be
// consecutive runs of local_invocation_index, as lib/lanes_subgroup takes them.
// Constants: WG_THREADS (a multiple of the subgroup size).
var<workgroup> red: array<f32, WG_THREADS>;

fn wg_reduce(lid: u32, v: f32, take_max: bool) -> f32 {
    let size = subgroupAdd(1u);
    let s = select(subgroupAdd(v), subgroupMax(v), take_max);
    workgroupBarrier(); // the previous reduction's result has been read by everyone
    if (lid % size == 0u) {
        red[lid / size] = s;
    }
    workgroupBarrier();
    var r = red[0];
    for (var j = 1u; j < WG_THREADS / size; j++) {
        r = select(r + red[j], max(r, red[j]), take_max);
    }
    return r;
}

fn wg_sum(lid: u32, v: f32) -> f32 {
    return wg_reduce(lid, v, false);
}

fn wg_max(lid: u32, v: f32) -> f32 {
    return wg_reduce(lid, v, true);
}
