// Greedy sampling on the GPU: out[r] = the index of the largest logit of row r (lowest index
// on ties), so decode reads back 4 bytes per row instead of the vocabulary. Per row (grid y),
// GROUPS workgroups each reduce a slice of the logits and publish (value, index) through
// atomics (coherent across workgroups); the last workgroup of the row to finish, found by a
// counter, reduces the GROUPS candidates and resets the counter for the next step. One
// dispatch, and every SM helps scan a large vocabulary.
// Relies on storageBarrier() ordering storage writes device-wide around the counter, which is
// what naga emits for Vulkan (a Device-scope acquire-release barrier), the backend this is
// tested on; Metal's threadgroup barrier promises less.
// Constants: V, GROUPS (<= WG_THREADS), WG_THREADS; the reduction from lib/argmax_reduce, the
// logits read through lib/logit_value.
@group(0) @binding(0) var<storage, read> logits: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
// Per row: [value bits, index] per workgroup, then the finished-workgroup counter.
@group(0) @binding(2) var<storage, read_write> candidates: array<atomic<u32>>;

const SLICE: u32 = (V + GROUPS - 1u) / GROUPS;
const ROW_WORDS: u32 = 2u * GROUPS + 1u;

var<workgroup> finished: u32;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let base = wg.y * V;
    let cand = wg.y * ROW_WORDS;
    var bv = LOWEST_LOGIT;
    var bi = 0xffffffffu;
    let end = min(V, (wg.x + 1u) * SLICE);
    for (var i = wg.x * SLICE + lid; i < end; i += WG_THREADS) {
        let v = logit_value(logits[base + i]);
        if (v > bv) {
            bv = v;
            bi = i;
        }
    }
    let best = wg_argmax(lid, bv, bi);
    if (lid == 0u) {
        atomicStore(&candidates[cand + 2u * wg.x], bitcast<u32>(best_v[0]));
        atomicStore(&candidates[cand + 2u * wg.x + 1u], best);
    }
    storageBarrier();
    if (lid == 0u) {
        finished = atomicAdd(&candidates[cand + 2u * GROUPS], 1u);
    }
    if (workgroupUniformLoad(&finished) != GROUPS - 1u) {
        return;
    }
    storageBarrier();
    bv = LOWEST_LOGIT;
    bi = 0xffffffffu;
    if (lid < GROUPS) {
        bv = bitcast<f32>(atomicLoad(&candidates[cand + 2u * lid]));
        bi = atomicLoad(&candidates[cand + 2u * lid + 1u]);
    }
    let winner = wg_argmax(lid, bv, bi);
    if (lid == 0u) {
        out[wg.y] = winner;
        atomicStore(&candidates[cand + 2u * GROUPS], 0u);
    }
}
