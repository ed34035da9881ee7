// Read-bandwidth probe for `wginfer bench kernels`: every thread reads PER_THREAD vec4s (one
// per workgroup stride, all in flight), so the dispatch streams the whole buffer once. The sum
// feeds a branch that never writes in practice, so the reads cannot be dropped.
// Constants: PER_THREAD, WG_THREADS.
@group(0) @binding(0) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> sink: array<f32>;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let base = (wg.y * groups.x + wg.x) * WG_THREADS * PER_THREAD + lid;
    if (base >= arrayLength(&src)) {
        return; // the tail of a 2-D grid
    }
    var acc = vec4<f32>(0.0);
    for (var j = 0u; j < PER_THREAD; j++) {
        acc += src[base + j * WG_THREADS];
    }
    if (dot(acc, vec4<f32>(1.0)) == 1.0e30) {
        sink[0] = acc.x;
    }
}
