// Decode attention over long contexts, a KV group's query heads together (the seed's section
// 3.3) and the positions split over the grid's z (flash-decoding): one workgroup per (KV head,
// row, split) reads each K and V row of its share once for all GROUP = HQ / HKV query heads,
// where attention_flash's workgroup per query head reads them GROUP times. A split walks its
// positions in chunks of CHUNK with an online softmax; every K row of a chunk is loaded before
// the first score and every V row a thread adds before the first sum, so a chunk costs two
// waits on memory (attention_flash's tiles of 64 positions wait twice each).
// A chunk's scores, GROUP x CHUNK, stay in workgroup memory; each head's chunk maximum is
// reduced by RED threads of their own; the weighted sums of V are split over thread groups of
// D4 lanes (PARTS of them), each also adding its positions' weights, and the groups meet once
// at the end. Splits publish each head's maximum, weight sum and weighted V sum through
// atomics; the last of a (row, KV head) to finish merges them (the same storageBarrier
// assumption as shaders/argmax.wgsl) and resets its counter.
// Row t attends to its sequence's positions (lib/plan), a local layer's to the last WINDOW
// (lib/attention_window).
// Constants: HD (a multiple of 4, HD / 4 <= WG_THREADS), HQ, HKV (GROUP * RED <= WG_THREADS),
// SCALE, WINDOW, WG_THREADS, SCORE_LANES (dividing HD / 4), CHUNK (a multiple of
// WG_THREADS / SCORE_LANES and of RED), MAX_SPLITS, MAX_ROWS (rows with split partials),
// MAX_KV_HEADS (at least HKV); lib/plan's.
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
// Bindings 1 and 2, the K and V caches: lib/kv_vec4, lib/kv_u64 or lib/kv_f16.
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
// o as f16 rows too where the o projection reads them (binding 7): lib/out_f16 or lib/out_f16_none.
@group(0) @binding(4) var<storage, read> plan: array<u32>;
// A counter per (row, KV head) of up to MAX_ROWS x MAX_KV_HEADS, then per (row, head, split):
// max, weight sum, HD weighted V sums (f32 bits). The counters come first, at the same place
// for every head shape, so kernels of other shapes may share the buffer: each is 0 between
// dispatches, and the partials are written before they are read.
@group(0) @binding(5) var<storage, read_write> partials: array<atomic<u32>>;

const GROUP: u32 = HQ / HKV;
const D4: u32 = HD / 4u;
// Positions scored at once (SCORE_LANES lanes each), and such rounds per chunk.
const TILE: u32 = WG_THREADS / SCORE_LANES;
const ROUNDS: u32 = CHUNK / TILE;
// vec4s of a K row per lane.
const KE: u32 = D4 / SCORE_LANES;
// Thread groups of D4 lanes for the weighted sums of V (threads past whole groups take none),
// and the V rows each adds per chunk.
const PARTS: u32 = WG_THREADS / D4;
const PER_PART: u32 = (CHUNK + PARTS - 1u) / PARTS;
// Threads reducing one head's chunk scores.
const RED: u32 = 32u;
const PARTIAL: u32 = HD + 2u;
const COUNTERS: u32 = MAX_ROWS * MAX_KV_HEADS;
// Splits merged per round of loads.
const MERGE_LOADS: u32 = 8u;

var<workgroup> qs: array<vec4<f32>, GROUP * D4>;
var<workgroup> scores: array<f32, GROUP * CHUNK>;
var<workgroup> slot_of: array<u32, CHUNK>;
var<workgroup> red: array<f32, WG_THREADS>;
var<workgroup> chunk_max: array<f32, GROUP>;
var<workgroup> partial: array<vec4<f32>, WG_THREADS>;
var<workgroup> weight_part: array<f32, WG_THREADS>;
// The merge's per-split maxima and weight sums, per head.
var<workgroup> split_max: array<f32, GROUP * MAX_SPLITS>;
var<workgroup> split_sum: array<f32, GROUP * MAX_SPLITS>;
var<workgroup> finished: u32;

// Where head h of row t keeps split s's results.
fn partial_at(t: u32, h: u32, s: u32) -> u32 {
    return COUNTERS + ((t * HQ + h) * MAX_SPLITS + s) * PARTIAL;
}

fn partial_sums(at: u32, d4: u32) -> vec4<f32> {
    let i = at + 2u + 4u * d4;
    return vec4<f32>(
        bitcast<f32>(atomicLoad(&partials[i])),
        bitcast<f32>(atomicLoad(&partials[i + 1u])),
        bitcast<f32>(atomicLoad(&partials[i + 2u])),
        bitcast<f32>(atomicLoad(&partials[i + 3u])),
    );
}

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let kvh = wg.x;
    let t = wg.y;
    let span = row_span(t);
    let n = span.n;
    // The group's query heads are consecutive in q.
    let qo = (t * HQ + kvh * GROUP) * D4;
    for (var e = lid; e < GROUP * D4; e += WG_THREADS) {
        qs[e] = q[qo + e] * SCALE;
    }
    workgroupBarrier();
    // This split's positions: whole chunks, an even share of them.
    let splits = groups.z;
    let chunks = (n + CHUNK - 1u) / CHUNK;
    let j_begin = wg.z * chunks / splits * CHUNK;
    let j_end = min(n, (wg.z + 1u) * chunks / splits * CHUNK);
    let lane = lid % SCORE_LANES;
    let d4 = lid % D4;
    let part = lid / D4;
    var m: array<f32, GROUP>;
    var l: array<f32, GROUP>;
    var acc: array<vec4<f32>, GROUP>;
    for (var g = 0u; g < GROUP; g++) {
        m[g] = -3.0e38;
        l[g] = 0.0;
        acc[g] = vec4<f32>(0.0);
    }
    for (var c0 = j_begin; c0 < j_end; c0 += CHUNK) {
        let valid = min(j_end - c0, CHUNK);
        var kr: array<vec4<f32>, ROUNDS * KE>;
        for (var r = 0u; r < ROUNDS; r++) {
            let j = r * TILE + lid / SCORE_LANES;
            // Positions past the split's end reread its last one; their weights are 0.
            let slot = kv_slot_in(span.table, span.lo + c0 + min(j, valid - 1u));
            if (lane == 0u) {
                slot_of[j] = slot;
            }
            let ko = (slot * HKV + kvh) * D4;
            for (var e = 0u; e < KE; e++) {
                kr[r * KE + e] = k_at(ko + e * SCORE_LANES + lane);
            }
        }
        for (var r = 0u; r < ROUNDS; r++) {
            let j = r * TILE + lid / SCORE_LANES;
            for (var g = 0u; g < GROUP; g++) {
                var s = 0.0;
                for (var e = 0u; e < KE; e++) {
                    s += dot(qs[g * D4 + e * SCORE_LANES + lane], kr[r * KE + e]);
                }
                s = score_lanes_sum(s);
                if (lane == 0u) {
                    scores[g * CHUNK + j] = select(-3.0e38, s, j < valid);
                }
            }
        }
        workgroupBarrier();
        // Each head's chunk maximum: RED threads take every RED-th score, one thread their maxima.
        let rg = lid / RED;
        if (rg < GROUP) {
            var mx = -3.0e38;
            for (var i = lid % RED; i < CHUNK; i += RED) {
                mx = max(mx, scores[rg * CHUNK + i]);
            }
            red[lid] = mx;
        }
        workgroupBarrier();
        if (lid < GROUP) {
            var mx = red[lid * RED];
            for (var i = 1u; i < RED; i++) {
                mx = max(mx, red[lid * RED + i]);
            }
            chunk_max[lid] = mx;
        }
        workgroupBarrier();
        // Every thread keeps each head's running maximum; what it has summed is rescaled to it.
        var corr: array<f32, GROUP>;
        for (var g = 0u; g < GROUP; g++) {
            let m_new = max(m[g], chunk_max[g]);
            corr[g] = exp(m[g] - m_new);
            m[g] = m_new;
        }
        if (rg < GROUP) {
            for (var i = lid % RED; i < CHUNK; i += RED) {
                let w = rg * CHUNK + i;
                scores[w] = exp(scores[w] - m[rg]);
            }
        }
        workgroupBarrier();
        if (part < PARTS) {
            var vr: array<vec4<f32>, PER_PART>;
            for (var i = 0u; i < PER_PART; i++) {
                let j = min(part + i * PARTS, CHUNK - 1u);
                vr[i] = v_at((slot_of[j] * HKV + kvh) * D4 + d4);
            }
            for (var g = 0u; g < GROUP; g++) {
                var a = vec4<f32>(0.0);
                var ws = 0.0;
                for (var i = 0u; i < PER_PART; i++) {
                    let j = part + i * PARTS;
                    let w = select(0.0, scores[g * CHUNK + min(j, CHUNK - 1u)], j < CHUNK);
                    a += w * vr[i];
                    ws += w;
                }
                acc[g] = acc[g] * corr[g] + a;
                l[g] = l[g] * corr[g] + ws;
            }
        }
        workgroupBarrier(); // scores and slot_of are rewritten by the next chunk
    }
    // Each head's thread groups meet: stored where the row is not split, else published.
    for (var g = 0u; g < GROUP; g++) {
        partial[lid] = acc[g];
        weight_part[lid] = l[g];
        workgroupBarrier();
        if (lid < D4) {
            var total = vec4<f32>(0.0);
            var den = 0.0;
            for (var p = 0u; p < PARTS; p++) {
                total += partial[p * D4 + lid];
                den += weight_part[p * D4];
            }
            if (splits == 1u) {
                let v = total / den;
                o[qo + g * D4 + lid] = v;
                store_f16x4(qo + g * D4 + lid, v);
            } else {
                let at = partial_at(t, kvh * GROUP + g, wg.z);
                if (lid == 0u) {
                    atomicStore(&partials[at], bitcast<u32>(m[g]));
                    atomicStore(&partials[at + 1u], bitcast<u32>(den));
                }
                for (var c = 0u; c < 4u; c++) {
                    atomicStore(&partials[at + 2u + 4u * lid + c], bitcast<u32>(total[c]));
                }
            }
        }
        workgroupBarrier();
    }
    if (splits == 1u) {
        return;
    }
    storageBarrier();
    let counter = t * HKV + kvh;
    if (lid == 0u) {
        finished = atomicAdd(&partials[counter], 1u);
    }
    if (workgroupUniformLoad(&finished) != splits - 1u) {
        return;
    }
    storageBarrier();
    // The last split merges every head's splits, rescaled to the largest maximum.
    for (var i = lid; i < GROUP * splits; i += WG_THREADS) {
        let g = i / splits;
        let at = partial_at(t, kvh * GROUP + g, i % splits);
        split_max[g * MAX_SPLITS + i % splits] = bitcast<f32>(atomicLoad(&partials[at]));
        split_sum[g * MAX_SPLITS + i % splits] = bitcast<f32>(atomicLoad(&partials[at + 1u]));
    }
    workgroupBarrier();
    for (var i = lid; i < GROUP * D4; i += WG_THREADS) {
        let g = i / D4;
        let h = kvh * GROUP + g;
        var mx = -3.0e38;
        for (var s = 0u; s < splits; s++) {
            mx = max(mx, split_max[g * MAX_SPLITS + s]);
        }
        var den = 0.0;
        var sum = vec4<f32>(0.0);
        // MERGE_LOADS splits' sums are loaded before the first is added.
        for (var s0 = 0u; s0 < splits; s0 += MERGE_LOADS) {
            var v: array<vec4<f32>, MERGE_LOADS>;
            for (var u = 0u; u < MERGE_LOADS; u++) {
                v[u] = partial_sums(partial_at(t, h, min(s0 + u, splits - 1u)), i % D4);
            }
            for (var u = 0u; u < MERGE_LOADS; u++) {
                if (s0 + u < splits) {
                    let w = exp(split_max[g * MAX_SPLITS + s0 + u] - mx);
                    den += split_sum[g * MAX_SPLITS + s0 + u] * w;
                    sum += v[u] * w;
                }
            }
        }
        let v = sum / den;
        o[qo + i] = v;
        store_f16x4(qo + i, v);
    }
    if (lid == 0u) {
        atomicStore(&partials[counter], 0u);
    }
}
