// Greedy sampling on the GPU: out[0] = the index of the largest logit (lowest index on ties),
// so decode reads back 4 bytes instead of the vocabulary. Constants: V, WG_THREADS.
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

var<workgroup> best_v: array<f32, WG_THREADS>;
var<workgroup> best_i: array<u32, WG_THREADS>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(local_invocation_index) lid: u32) {
    var bv = -3.0e38;
    var bi = 0xffffffffu;
    for (var i = lid; i < V; i += WG_THREADS) {
        let v = logits[i];
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
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
    if (lid == 0u) {
        out[0] = best_i[0];
    }
}
