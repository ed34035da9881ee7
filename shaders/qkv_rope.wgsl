// Fused QKV projection + bias + RoPE + KV-cache write: x is read once for q, k and v.
// W holds the rows of Wq, Wk, Wv stacked; the q and k rows of each head are stored pair-adjacent
// (row 2i = original i, row 2i+1 = original i + HD/2) so a rotation pair arrives in one
// store_pair call. q keeps that order; k is written in the same order into the cache, so q.k is
// unchanged. v rows keep their original order.
// Each row writes its K/V at its own sequence's slot for its position (lib/plan).
// With QK_NORM (Qwen3, Gemma 3), q and k are stored as projected: their per-head RMSNorm needs the whole
// head, which no single workgroup of the matmul cores holds, so the qk_norm pass that follows
// normalizes and rotates them in place.
// A weight whose q/k/v rows differ in type (or that spans several bindings) is one dispatch per
// part: this one's N rows start at row N_OFFSET of the fused weight.
// K and V are stored as lib/kv_pair_* says (f32 or f16 pairs).
// Constants: QN = HQ*HD, KVN = HKV*HD, HD, HAS_BIAS, QK_NORM, N_OFFSET; lib/plan's.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> x: array<XElem>;
@group(0) @binding(2) var<storage, read> w: array<WElem>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(5) var<storage, read_write> q: array<f32>;
@group(0) @binding(6) var<storage, read_write> k_cache: array<KvPair>;
@group(0) @binding(7) var<storage, read_write> v_cache: array<KvPair>;
@group(0) @binding(8) var<storage, read> plan: array<u32>;

// The pair of head column n (even) at pos, as this kernel stores it.
fn rotate(v: vec2<f32>, pos: u32, n: u32) -> vec2<f32> {
    if (QK_NORM) {
        return v;
    }
    return rope(v, pos, (n % HD) / 2u);
}

fn store_pair(m: u32, part_n: u32, v0: f32, v1: f32) {
    let n = N_OFFSET + part_n;
    var v = vec2<f32>(v0, v1);
    if (HAS_BIAS) {
        v += vec2<f32>(bias[n], bias[n + 1u]);
    }
    let pos = row_pos(m);
    let slot = kv_slot(row_seq(m), pos);
    if (n < QN) {
        let r = rotate(v, pos, n);
        q[m * QN + n] = r.x;
        q[m * QN + n + 1u] = r.y;
    } else if (n < QN + KVN) {
        let r = rotate(v, pos, n - QN);
        k_cache[(slot * KVN + n - QN) / 2u] = kv_pair(r);
    } else {
        v_cache[(slot * KVN + n - QN - KVN) / 2u] = kv_pair(v);
    }
}
