// Attention for short contexts: one workgroup per (query head, token) keeps every score of its
// row in workgroup memory (at most PLAIN_MAX), then softmax and the weighted sum of V. The sum
// is split over PARTS = WG_THREADS / HD groups of threads, each taking every PARTS-th position,
// so decode (one token, few heads) still keeps the whole workgroup busy.
// Grouped-query attention: query head h reads KV head h / (HQ / HKV).
// The token at absolute position pos sees positions kv_lo ..= pos (causal, and what the ring
// still holds). Constants: HD (<= WG_THREADS), HQ, HKV, CAP, PLAIN_MAX, SCALE, WG_THREADS;
// lib/attention_combine.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> q: array<f32>;
@group(0) @binding(2) var<storage, read> k_cache: array<f32>;
@group(0) @binding(3) var<storage, read> v_cache: array<f32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;

const PARTS: u32 = WG_THREADS / HD;

var<workgroup> scores: array<f32, PLAIN_MAX>;
var<workgroup> qs: array<f32, HD>;

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
    var mx = -3.0e38;
    for (var j = lid; j < n; j += WG_THREADS) {
        let ko = (((lo + j) % CAP) * HKV + kvh) * HD;
        var s = 0.0;
        for (var d = 0u; d < HD; d++) {
            s += qs[d] * k_cache[ko + d];
        }
        scores[j] = s;
        mx = max(mx, s);
    }
    mx = wg_max(lid, mx);
    var sum = 0.0;
    for (var j = lid; j < n; j += WG_THREADS) {
        let e = exp(scores[j] - mx);
        scores[j] = e;
        sum += e;
    }
    sum = wg_sum(lid, sum); // its barriers also publish scores
    let d = lid % HD;
    let part = lid / HD;
    var acc = 0.0;
    if (part < PARTS) {
        for (var j = part; j < n; j += PARTS) {
            acc += scores[j] * v_cache[(((lo + j) % CAP) * HKV + kvh) * HD + d];
        }
    }
    combine_parts(lid, acc, sum, qo);
}
