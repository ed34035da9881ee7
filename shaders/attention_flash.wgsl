// Attention for long contexts, flash style: one workgroup per (query head, token) walks the
// K/V positions in tiles of WG_THREADS, keeping a running max and sum (online softmax), so
// workgroup memory does not grow with the context. Scores of a tile are one position per
// thread (K read as vec4s); the weighted sum of V is split over thread groups by
// lib/attention_combine. Positions past the causal limit inside a tile are masked by
// predication (select).
// Constants: HD (a multiple of 4, HD / 4 <= WG_THREADS), HQ, HKV, CAP, SCALE, WG_THREADS.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> k_cache: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> v_cache: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> o: array<vec4<f32>>;

var<workgroup> qs: array<vec4<f32>, D4>;
var<workgroup> p: array<f32, WG_THREADS>;
var<workgroup> slot_of: array<u32, WG_THREADS>;

fn slot_at(j: u32) -> u32 {
    return slot_of[j];
}

fn w_at(j: u32) -> f32 {
    return p[j];
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (HQ / HKV);
    let pos = step.start_pos + t;
    let lo = step.kv_lo;
    let n = pos + 1u - lo;
    let qo = (t * HQ + h) * D4;
    for (var e = lid; e < D4; e += WG_THREADS) {
        qs[e] = q[qo + e] * SCALE;
    }
    workgroupBarrier();
    var m = -3.0e38;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var j0 = 0u; j0 < n; j0 += WG_THREADS) {
        let j = j0 + lid;
        let valid = j < n;
        let slot = (lo + j) % CAP;
        let s = select(-3.0e38, score(slot, kvh), valid);
        let m_new = max(m, wg_max(lid, s));
        let w = select(0.0, exp(s - m_new), valid);
        p[lid] = w;
        slot_of[lid] = slot;
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(lid, w); // its barriers also publish p and slot_of
        acc = acc * corr + v_part(lid / D4, min(WG_THREADS, n - j0), kvh, lid % D4);
        m = m_new;
        workgroupBarrier(); // p and slot_of are rewritten by the next tile
    }
    combine_parts(lid, acc, l, qo);
}
