// Attention for long contexts, flash style: one workgroup per (query head, token) walks the
// K/V positions in tiles of TILE = WG_THREADS / SCORE_LANES, keeping a running max and sum
// (online softmax), so workgroup memory does not grow with the context. Each score of a tile is
// SCORE_LANES lanes reading its K row as adjacent vec4s (lib/score_sum_*), so a tile is 64
// positions where the plain kernel's 4 lanes apply and a decode token's positions spread over 4x
// the workgroups (H200 decode against one lane per position: after 1024 positions 956 -> 1,017
// tok/s, after 4096 900 -> 875; docs/PERF.md). The weighted sum of V is split over thread
// groups (lib/attention_combine), each thread loading its V values of a tile beside its K row,
// before the softmax's barriers, so both come in one trip to memory (H200 decode after 4096
// positions 899 -> 913 tok/s, docs/PERF.md). Positions past the causal limit inside a tile are
// masked by predication (select).
// Decode (one token) splits the positions over the grid's z dimension (flash-decoding): each
// workgroup publishes its running max, sum and weighted V sum through atomics and the last one
// of a head to finish merges them, so a long context is read by many workgroups at once
// (the same storageBarrier assumption as shaders/argmax.wgsl).
// Each row attends to its own sequence's positions (lib/plan); a local layer's to the last
// WINDOW of them (lib/attention_window's attend_lo).
// Constants: HD (a multiple of 4, HD / 4 <= WG_THREADS), HQ, HKV, SCALE, WINDOW, WG_THREADS,
// SCORE_LANES (dividing HD / 4), MAX_SPLITS, MAX_HEADS (HQ at most); lib/plan's.
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
// Bindings 1 and 2, the K and V caches: lib/kv_vec4 or lib/kv_u64.
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
// o as f16 rows too where the o projection reads them (binding 7): lib/out_f16 or lib/out_f16_none.
@group(0) @binding(4) var<storage, read> plan: array<u32>;
// One merge counter per head (MAX_HEADS of them, so kernels of any head shape can share the
// buffer), then per (head, split): max, sum, HD weighted V sums (f32 bits).
@group(0) @binding(5) var<storage, read_write> partials: array<atomic<u32>>;

const PARTIAL: u32 = HD + 2u;

// Where the partial results of split s of head h start.
fn partial_at(h: u32, s: u32) -> u32 {
    return MAX_HEADS + (h * MAX_SPLITS + s) * PARTIAL;
}
const TILE: u32 = WG_THREADS / SCORE_LANES;
// V values of a tile each thread loads (its thread group's every PARTS-th position).
const VLOADS: u32 = (TILE + PARTS - 1u) / PARTS;
// Splits whose partials a merging thread loads at once.
const MERGE_LOADS: u32 = 4u;
var<workgroup> finished: u32;

var<workgroup> qs: array<vec4<f32>, D4>;
var<workgroup> p: array<f32, TILE>;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let h = wg.x;
    let t = wg.y;
    let kvh = h / (HQ / HKV);
    let span = row_span(t);
    let n = span.n;
    let qo = (t * HQ + h) * D4;
    for (var e = lid; e < D4; e += WG_THREADS) {
        qs[e] = q[qo + e] * SCALE;
    }
    workgroupBarrier();
    // This split's positions: whole tiles, spread evenly.
    let splits = groups.z;
    let tiles = (n + TILE - 1u) / TILE;
    let per_split = (tiles + splits - 1u) / splits;
    let j_end = min(n, (wg.z + 1u) * per_split * TILE);
    let lane = lid % SCORE_LANES;
    var m = -3.0e38;
    var l = 0.0;
    var acc = vec4<f32>(0.0);
    for (var j0 = wg.z * per_split * TILE; j0 < j_end; j0 += TILE) {
        let j = j0 + lid / SCORE_LANES;
        let valid = j < j_end;
        let slot = kv_slot_in(span.table, span.lo + min(j, j_end - 1u));
        // This thread's V values of the tile, loaded beside K (positions past the end read the
        // last one, weighed 0).
        var vv: array<vec4<f32>, VLOADS>;
        for (var r = 0u; r < VLOADS; r++) {
            let jv = min(j0 + lid / D4 + r * PARTS, j_end - 1u);
            vv[r] = v_at((kv_slot_in(span.table, span.lo + jv) * HKV + kvh) * D4 + lid % D4);
        }
        let s = select(-3.0e38, score(slot, kvh, lane), valid);
        let m_new = max(m, wg_max(lid, s));
        // Every lane of a position holds its score; the first one publishes it and counts it.
        let w = select(0.0, exp(s - m_new), valid && lane == 0u);
        if (lane == 0u) {
            p[lid / SCORE_LANES] = w;
        }
        let corr = exp(m - m_new);
        l = l * corr + wg_sum(lid, w); // its barriers also publish p
        var vsum = vec4<f32>(0.0);
        for (var r = 0u; r < VLOADS; r++) {
            let jj = lid / D4 + r * PARTS;
            vsum += select(0.0, p[min(jj, TILE - 1u)], jj < TILE) * vv[r];
        }
        acc = acc * corr + vsum;
        m = m_new;
        workgroupBarrier(); // p is rewritten by the next tile
    }
    if (splits == 1u) {
        combine_parts(lid, acc, l, qo);
        return;
    }
    let total = sum_parts(lid, acc);
    let base = partial_at(h, wg.z);
    if (lid == 0u) {
        atomicStore(&partials[base], bitcast<u32>(m));
        atomicStore(&partials[base + 1u], bitcast<u32>(l));
    }
    if (lid < D4) {
        for (var c = 0u; c < 4u; c++) {
            atomicStore(&partials[base + 2u + 4u * lid + c], bitcast<u32>(total[c]));
        }
    }
    storageBarrier();
    let counter = h;
    if (lid == 0u) {
        finished = atomicAdd(&partials[counter], 1u);
    }
    if (workgroupUniformLoad(&finished) != splits - 1u) {
        return;
    }
    storageBarrier();
    // The last split of this head merges all of them: thread lid takes value group lid % D4
    // of splits lid / D4, lid / D4 + PARTS, ..., MERGE_LOADS of them at a time, every load of
    // a batch issued before the first is used (one trip to memory per batch of PARTS x
    // MERGE_LOADS splits, 32 with 128 threads at head_dim 64, where the loads once waited on the
    // splits' largest max, then came one split after another), each folded in with its own
    // max; the threads' sums are then rescaled to the largest of their maxima.
    var m_t = -3.0e38;
    var den = 0.0;
    var sum = vec4<f32>(0.0);
    // Threads past whole groups (WG_THREADS not a multiple of D4) take no split.
    let first = select(splits, lid / D4, lid < PARTS * D4);
    for (var s0 = first; s0 < splits; s0 += MERGE_LOADS * PARTS) {
        var ms: array<f32, MERGE_LOADS>;
        var ls: array<f32, MERGE_LOADS>;
        var vs: array<vec4<f32>, MERGE_LOADS>;
        for (var r = 0u; r < MERGE_LOADS; r++) {
            let s = s0 + r * PARTS;
            let b = partial_at(h, min(s, splits - 1u));
            // Past the last split: a copy of it, weighed 0.
            let real = s < splits;
            ms[r] = select(-3.0e38, bitcast<f32>(atomicLoad(&partials[b])), real);
            ls[r] = select(0.0, bitcast<f32>(atomicLoad(&partials[b + 1u])), real);
            for (var c = 0u; c < 4u; c++) {
                vs[r][c] = select(0.0, bitcast<f32>(atomicLoad(&partials[b + 2u + 4u * (lid % D4) + c])), real);
            }
        }
        for (var r = 0u; r < MERGE_LOADS; r++) {
            let m_new = max(m_t, ms[r]);
            let old_w = exp(m_t - m_new);
            let w = exp(ms[r] - m_new);
            den = den * old_w + ls[r] * w;
            sum = sum * old_w + vs[r] * w;
            m_t = m_new;
        }
    }
    let mx = wg_max(lid, m_t);
    let scale = exp(m_t - mx);
    den *= scale;
    sum *= scale;
    // Each split's sum is counted once: by the first value group of its thread group.
    let den_all = wg_sum(lid, select(0.0, den, lid % D4 == 0u));
    let sum_all = sum_parts(lid, sum);
    if (lid < D4) {
        let v = sum_all / den_all;
        o[qo + lid] = v;
        store_f16x4(qo + lid, v);
    }
    if (lid == 0u) {
        atomicStore(&partials[counter], 0u);
    }
}
