// Attention of a KV group's query heads together, for short contexts (the seed's section 3.3):
// one workgroup per (KV head, row) reads each K and V row of the row's positions once for all
// GROUP = HQ / HKV query heads, where attention_plain's workgroup per query head reads them
// GROUP times. Every head's scores stay in workgroup memory (GROUP x PLAIN_MAX); each K row is
// read by SCORE_LANES adjacent lanes into registers and scored against every head's query;
// each head's max and sum are workgroup reductions; each thread then adds its dimensions of
// its share of the V rows into one sum per head, and the shares meet in workgroup memory.
// Row t of the step attends to its own sequence's positions (lib/plan, lib/attention_window).
// Constants: HD (a multiple of 4, HD / 4 <= WG_THREADS), HQ, HKV, PLAIN_MAX, SCALE, WINDOW,
// WG_THREADS, SCORE_LANES (dividing HD / 4); lib/plan's.
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
// Bindings 1 and 2, the K and V caches: lib/kv_vec4, lib/kv_u64 or lib/kv_f16.
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
// o as f16 rows too where the o projection reads them (binding 7): lib/out_f16 or lib/out_f16_none.
@group(0) @binding(4) var<storage, read> plan: array<u32>;

const GROUP: u32 = HQ / HKV;
const D4: u32 = HD / 4u;
// Thread groups of D4 lanes for the weighted sums of V (threads past whole groups take none).
const PARTS: u32 = WG_THREADS / D4;

var<workgroup> scores: array<f32, GROUP * PLAIN_MAX>;
var<workgroup> qs: array<vec4<f32>, GROUP * D4>;
var<workgroup> partial: array<vec4<f32>, WG_THREADS>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let kvh = wg.x;
    let t = wg.y;
    let span = row_span(t);
    let table = span.table;
    let kv_lo = span.lo;
    let n = span.n;
    // The group's query heads are consecutive in q.
    let qo = (t * HQ + kvh * GROUP) * D4;
    for (var e = lid; e < GROUP * D4; e += WG_THREADS) {
        qs[e] = q[qo + e] * SCALE;
    }
    workgroupBarrier();
    let lane = lid % SCORE_LANES;
    for (var j0 = 0u; j0 < n; j0 += WG_THREADS / SCORE_LANES) {
        let j = j0 + lid / SCORE_LANES;
        let ko = (kv_slot_in(table, kv_lo + min(j, n - 1u)) * HKV + kvh) * D4;
        var kr: array<vec4<f32>, D4 / SCORE_LANES>;
        for (var e = 0u; e < D4 / SCORE_LANES; e++) {
            kr[e] = k_at(ko + e * SCORE_LANES + lane);
        }
        for (var g = 0u; g < GROUP; g++) {
            var s = 0.0;
            for (var e = 0u; e < D4 / SCORE_LANES; e++) {
                s += dot(qs[g * D4 + e * SCORE_LANES + lane], kr[e]);
            }
            s = score_lanes_sum(s);
            if (j < n && lane == 0u) {
                scores[g * PLAIN_MAX + j] = s;
            }
        }
    }
    workgroupBarrier();
    var den: array<f32, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        var mx = -3.0e38;
        for (var j = lid; j < n; j += WG_THREADS) {
            mx = max(mx, scores[g * PLAIN_MAX + j]);
        }
        mx = wg_max(lid, mx);
        var sum = 0.0;
        for (var j = lid; j < n; j += WG_THREADS) {
            let e = exp(scores[g * PLAIN_MAX + j] - mx);
            scores[g * PLAIN_MAX + j] = e;
            sum += e;
        }
        den[g] = wg_sum(lid, sum); // its barriers also publish the weights
    }
    let d4 = lid % D4;
    let part = lid / D4;
    var acc: array<vec4<f32>, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        acc[g] = vec4<f32>(0.0);
    }
    // Four positions an iteration, added as attention_plain's v_part adds them, so a row
    // gets the same bits from either kernel (a batch's rows equal the same requests alone).
    if (part < PARTS) {
        var j = part;
        for (; j + 3u * PARTS < n; j += 4u * PARTS) {
            let v0 = v_at((kv_slot_in(table, kv_lo + j) * HKV + kvh) * D4 + d4);
            let v1 = v_at((kv_slot_in(table, kv_lo + j + PARTS) * HKV + kvh) * D4 + d4);
            let v2 = v_at((kv_slot_in(table, kv_lo + j + 2u * PARTS) * HKV + kvh) * D4 + d4);
            let v3 = v_at((kv_slot_in(table, kv_lo + j + 3u * PARTS) * HKV + kvh) * D4 + d4);
            for (var g = 0u; g < GROUP; g++) {
                let w = g * PLAIN_MAX + j;
                acc[g] += scores[w] * v0 + scores[w + PARTS] * v1 + scores[w + 2u * PARTS] * v2
                    + scores[w + 3u * PARTS] * v3;
            }
        }
        for (; j < n; j += PARTS) {
            let v = v_at((kv_slot_in(table, kv_lo + j) * HKV + kvh) * D4 + d4);
            for (var g = 0u; g < GROUP; g++) {
                acc[g] += scores[g * PLAIN_MAX + j] * v;
            }
        }
    }
    for (var g = 0u; g < GROUP; g++) {
        partial[lid] = acc[g];
        workgroupBarrier();
        if (lid < D4) {
            var total = vec4<f32>(0.0);
            for (var p = 0u; p < PARTS; p++) {
                total += partial[p * D4 + lid];
            }
            let v = total / den[g];
            o[qo + g * D4 + lid] = v;
            store_f16x4(qo + g * D4 + lid, v);
        }
        workgroupBarrier();
    }
}
