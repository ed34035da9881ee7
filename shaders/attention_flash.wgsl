// Attention for long contexts, flash style: one workgroup per (query head, token) walks the
// K/V positions in tiles of WG_THREADS, keeping a running max and sum (online softmax), so
// workgroup memory does not grow with the context. Positions past the causal limit inside a
// tile are masked by predication (select), not by branching around the tile.
// Constants: HD, HQ, HKV, CAP, SCALE, WG_THREADS, DPT = ceil(HD / WG_THREADS).
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

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
    var m = -3.0e38;
    var l = 0.0;
    var acc: array<f32, DPT>;
    for (var j0 = 0u; j0 < n; j0 += WG_THREADS) {
        let j = j0 + lid;
        let valid = j < n;
        let slot = (lo + j) % CAP;
        let ko = (slot * HKV + kvh) * HD;
        var s = 0.0;
        for (var d = 0u; d < HD; d++) {
            s += qs[d] * k_cache[ko + d];
        }
        s = select(-3.0e38, s, valid);
        let m_new = max(m, wg_max(lid, s));
        let e = select(0.0, exp(s - m_new), valid);
        p[lid] = e;
        slot_of[lid] = slot;
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(lid, e); // its barriers also publish p and slot_of
        let tile = min(WG_THREADS, n - j0);
        for (var i = 0u; i < DPT; i++) {
            let d = lid + i * WG_THREADS;
            if (d < HD) {
                var a = acc[i] * corr;
                for (var jj = 0u; jj < tile; jj++) {
                    a += p[jj] * v_cache[(slot_of[jj] * HKV + kvh) * HD + d];
                }
                acc[i] = a;
            }
        }
        m = m_new;
        workgroupBarrier(); // p and slot_of are rewritten by the next tile
    }
    for (var i = 0u; i < DPT; i++) {
        let d = lid + i * WG_THREADS;
        if (d < HD) {
            o[qo + d] = acc[i] / l;
        }
    }
}
