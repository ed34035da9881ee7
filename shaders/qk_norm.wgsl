// Per-head RMSNorm of q and k, then RoPE, in place (Qwen3, Gemma 3; after qkv_rope built with QK_NORM,
// which stores them as projected): each head vector h of a row becomes
// rope(h / sqrt(mean(h^2) + EPS) * weight). One workgroup per (row, head): workgroup y < HQ is
// q head y of row x, the others the row's k heads in its KV slot (lib/plan). Heads are in
// qkv_rope's pair-adjacent order, and so is the weight: HD values for q, then HD for k.
// The K cache holds pairs as lib/kv_pair_* says.
// Constants: QN = HQ*HD, KVN = HKV*HD, HD, EPS, WG_THREADS; lib/plan's.
@group(0) @binding(0) var<storage, read> norm_w: array<f32>;
@group(0) @binding(1) var<storage, read> inv_freq: array<f32>;
@group(0) @binding(2) var<storage, read_write> q: array<f32>;
@group(0) @binding(3) var<storage, read_write> k_cache: array<KvPair>;
@group(0) @binding(4) var<storage, read> plan: array<u32>;

const PAIRS: u32 = HD / 2u;

fn load_pair(is_q: bool, at: u32) -> vec2<f32> {
    if (is_q) {
        return vec2<f32>(q[at], q[at + 1u]);
    }
    return kv_unpair(k_cache[at / 2u]);
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let m = wg.x;
    let pos = row_pos(m);
    let is_q = wg.y < QN / HD;
    var at = m * QN + wg.y * HD;
    var w_at = 0u;
    if (!is_q) {
        at = kv_slot(row_seq(m), pos) * KVN + wg.y * HD - QN;
        w_at = HD;
    }
    var ss = 0.0;
    for (var i = lid; i < PAIRS; i += WG_THREADS) {
        let v = load_pair(is_q, at + 2u * i);
        ss += dot(v, v);
    }
    let inv = inverseSqrt(wg_sum(lid, ss) / f32(HD) + EPS);
    for (var i = lid; i < PAIRS; i += WG_THREADS) {
        let v = load_pair(is_q, at + 2u * i) * inv * vec2<f32>(norm_w[w_at + 2u * i], norm_w[w_at + 2u * i + 1u]);
        let r = rope(v, pos, i);
        if (is_q) {
            q[at + 2u * i] = r.x;
            q[at + 2u * i + 1u] = r.y;
        } else {
            k_cache[at / 2u + i] = kv_pair(r);
        }
    }
}
