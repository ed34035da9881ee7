// Greedy sampling on the GPU: out[0] = the index of the largest logit (lowest index on ties),
// so decode reads back 4 bytes instead of the vocabulary. Constants: V, WG_THREADS; the
// reduction from lib/argmax_reduce.
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;

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
    let best = wg_argmax(lid, bv, bi);
    if (lid == 0u) {
        out[0] = best;
    }
}
