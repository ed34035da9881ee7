// Attention for short contexts: one workgroup per (query head, token) keeps every score of its
// row in workgroup memory (at most PLAIN_MAX), then softmax and the weighted sum of V (split
// over thread groups by lib/attention_combine, so decode with few heads keeps the whole
// workgroup busy). Each score is SCORE_LANES lanes reading its K row as adjacent vec4s
// (lib/attention_combine); one position per thread (each load of a warp touching 32 rows) took
// 1.5x as long for a 512-token prefill on the H200 (docs/PERF.md).
// Grouped-query attention: query head h reads KV head h / (HQ / HKV).
// Row t of the step (any sequence) at absolute position pos sees its sequence's positions
// kv_lo ..= pos (causal, and what the sequence still holds; a local layer's last WINDOW only),
// found through lib/plan.
// Each position's KV slot comes from slot_at: lib/plain_slots_lookup or lib/plain_slots_table.
// Constants: HD (a multiple of 4, HD / 4 <= WG_THREADS), HQ, HKV, PLAIN_MAX, SCALE, WINDOW,
// WG_THREADS, SCORE_LANES (dividing HD / 4), SCORE_ROUNDS (rounds of positions scored an
// iteration, their K loads issued together); lib/plan's.
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
// Bindings 1 and 2, the K and V caches: lib/kv_vec4 or lib/kv_u64.
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
// o as f16 rows too where the o projection reads them (binding 7): lib/out_f16 or lib/out_f16_none.
@group(0) @binding(4) var<storage, read> plan: array<u32>;

var<workgroup> scores: array<f32, PLAIN_MAX>;
var<workgroup> qs: array<vec4<f32>, D4>;
var<private> kv_lo: u32;
var<private> table: SeqTable;

fn w_at(j: u32) -> f32 {
    return scores[j];
}

// Sum over positions j = first, first + PARTS, ... < end of weight(j) * V[slot(j)], where
// weights and slots come from the kernel (w_at, slot_at).
fn v_part(first: u32, end: u32, kvh: u32, d4: u32) -> vec4<f32> {
    var acc = vec4<f32>(0.0);
    var j = first;
    for (; j + 3u * PARTS < end; j += 4u * PARTS) {
        let v0 = v_at((slot_at(j) * HKV + kvh) * D4 + d4);
        let v1 = v_at((slot_at(j + PARTS) * HKV + kvh) * D4 + d4);
        let v2 = v_at((slot_at(j + 2u * PARTS) * HKV + kvh) * D4 + d4);
        let v3 = v_at((slot_at(j + 3u * PARTS) * HKV + kvh) * D4 + d4);
        acc += w_at(j) * v0 + w_at(j + PARTS) * v1 + w_at(j + 2u * PARTS) * v2 + w_at(j + 3u * PARTS) * v3;
    }
    for (; j < end; j += PARTS) {
        acc += w_at(j) * v_at((slot_at(j) * HKV + kvh) * D4 + d4);
    }
    return acc;
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (HQ / HKV);
    let span = row_span(t);
    table = span.table;
    kv_lo = span.lo;
    let n = span.n;
    let qo = (t * HQ + h) * D4;
    for (var e = lid; e < D4; e += WG_THREADS) {
        qs[e] = q[qo + e] * SCALE;
    }
    fill_slots(lid, n);
    workgroupBarrier();
    // SCORE_LANES lanes per position: a round covers ROUND positions.
    const ROUND: u32 = WG_THREADS / SCORE_LANES;
    var mx = -3.0e38;
    let lane = lid % SCORE_LANES;
    for (var j0 = 0u; j0 < n; j0 += SCORE_ROUNDS * ROUND) {
        var s: array<f32, SCORE_ROUNDS>;
        for (var r = 0u; r < SCORE_ROUNDS; r++) {
            s[r] = score(slot_at(min(j0 + r * ROUND + lid / SCORE_LANES, n - 1u)), kvh, lane);
        }
        for (var r = 0u; r < SCORE_ROUNDS; r++) {
            let j = j0 + r * ROUND + lid / SCORE_LANES;
            if (j < n) {
                scores[j] = s[r];
                mx = max(mx, s[r]);
            }
        }
    }
    mx = wg_max(lid, mx);
    var sum = 0.0;
    for (var j = lid; j < n; j += WG_THREADS) {
        let e = exp(scores[j] - mx);
        scores[j] = e;
        sum += e;
    }
    sum = wg_sum(lid, sum); // its barriers also publish scores
    let acc = v_part(lid / D4, n, kvh, lid % D4);
    combine_parts(lid, acc, sum, qo);
}
