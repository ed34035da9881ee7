// Attention for long contexts, flash style: one workgroup per (query head, token) walks the
// K/V positions in tiles of WG_THREADS, keeping a running max and sum (online softmax), so
// workgroup memory does not grow with the context. Scores of a tile are computed one position
// per thread; the weighted sum of V is split over PARTS = WG_THREADS / HD groups of threads
// (each takes every PARTS-th position of the tile) and the groups' partial sums are added at
// the end. Positions past the causal limit inside a tile are masked by predication (select).
// Constants: HD (<= WG_THREADS), HQ, HKV, CAP, SCALE, WG_THREADS; lib/attention_combine.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

const PARTS: u32 = WG_THREADS / HD;

var<workgroup> qs: array<f32, HD>;
var<workgroup> p: array<f32, WG_THREADS>;
var<workgroup> slot_of: array<u32, WG_THREADS>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (HQ / HKV);
    let pos = step.start_pos + t;
    let lo = step.kv_lo;
    let n = pos + 1u - lo;
    let qo = (t * HQ + h) * HD;
    for (var d = lid; d < HD; d += WG_THREADS) {
        qs[d] = q[qo + d] * SCALE;
    }
    workgroupBarrier();
    let d = lid % HD;
    let part = lid / HD;
    var m = -3.0e38;
    var l = 0.0;
    var acc = 0.0;
    for (var j0 = 0u; j0 < n; j0 += WG_THREADS) {
        let j = j0 + lid;
        let valid = j < n;
        let slot = (lo + j) % CAP;
        let ko = (slot * HKV + kvh) * HD;
        var s = 0.0;
        for (var e = 0u; e < HD; e++) {
            s += qs[e] * k_cache[ko + e];
        }
        s = select(-3.0e38, s, valid);
        let m_new = max(m, wg_max(lid, s));
        let w = select(0.0, exp(s - m_new), valid);
        p[lid] = w;
        slot_of[lid] = slot;
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(lid, w); // its barriers also publish p and slot_of
        let tile = min(WG_THREADS, n - j0);
        acc *= corr;
        if (part < PARTS) {
            for (var jj = part; jj < tile; jj += PARTS) {
                acc += p[jj] * v_cache[(slot_of[jj] * HKV + kvh) * HD + d];
            }
        }
        m = m_new;
        workgroupBarrier(); // p and slot_of are rewritten by the next tile
    }
    combine_parts(lid, acc, l, qo);
}
