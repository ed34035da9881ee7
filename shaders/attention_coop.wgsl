enable f16;
enable wgpu_cooperative_matrix;
// Attention for multi-token steps on tensor cores (flash attention through cooperative
// matrices: 16x16 f16 fragments, f32 accumulation). One workgroup per (query head, query tile):
// a tile is up to BR = 16 * SUBGROUPS consecutive rows of one sequence at consecutive positions
// (lib/plan's tile list), each subgroup owning 16 of them. The workgroup walks the tile's key
// positions in blocks of BC: K and V of a block are staged once as f16 for all subgroups; each
// subgroup computes its 16 x BC scores S = Q K^T on tensor cores, takes them through workgroup
// memory to its lanes for the online softmax (RPL lanes per row, each holding a share of the
// row's running output in registers), and multiplies P V on tensor cores into workgroup memory,
// where its lanes add it to their rescaled outputs. Rows past a row's causal limit or before
// its oldest position (the sliding window) are masked in the softmax.
// Q is scaled and rounded to f16, K and V rounded to f16 as they are staged: tested against the
// scalar kernels' CPU reference with an f16 tolerance (tests/kernels/attention.rs).
// Rows of staged arrays are 16 bytes longer than their values (a fragment's 16 rows fall on
// different banks), the f32 rows of scores 32 bytes longer; a lane reads and writes every
// RPL-th vec4 of its row, so the lanes of a row pair touch every bank once. Coop loads' and
// stores' pointers and strides count vec4s.
// Constants: HD (a multiple of 16), HQ, HKV, SCALE, WINDOW, SG (the subgroup size, 16 * RPL),
// SUBGROUPS, WG_THREADS = SG * SUBGROUPS, BC (a multiple of 16, BC / RPL a multiple of 4),
// WIDE = max(BC, HD); lib/plan's.
@group(0) @binding(0) var<storage, read> q: array<vec4<f32>>;
// Bindings 1 and 2, the K and V caches: lib/kv_vec4 or lib/kv_f16.
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;
// o as f16 rows too where the o projection reads them (binding 7): lib/out_f16 or lib/out_f16_none.
@group(0) @binding(4) var<storage, read> plan: array<u32>;

const D4: u32 = HD / 4u;
const BR: u32 = 16u * SUBGROUPS;
// Lanes per row of a subgroup's 16, and each lane's vec4s of a row's scores and outputs.
const RPL: u32 = SG / 16u;
const SC4: u32 = BC / 4u / RPL;
const OC4: u32 = D4 / RPL;
// Row strides in vec4s: staged f16 rows with 8 values of skew, f32 rows with 8.
const KS4: u32 = (HD + 8u) / 4u;
const PS4: u32 = (BC + 8u) / 4u;
const SF4: u32 = (WIDE + 8u) / 4u;
// vec4s of K (and of V) in a block, and each thread's share of them.
const KV4: u32 = BC * D4;
const LOADS: u32 = (KV4 + WG_THREADS - 1u) / WG_THREADS;

// K and V of a block: BC rows (positions) of HD.
var<workgroup> ks: array<vec4<f16>, BC * KS4>;
var<workgroup> vs: array<vec4<f16>, BC * KS4>;
// The tile's queries, scaled: BR rows of HD.
var<workgroup> qs: array<vec4<f16>, BR * KS4>;
// The softmax weights P: BR rows of BC.
var<workgroup> ps: array<vec4<f16>, BR * PS4>;
// Per row its scores (BC), then its P V (HD).
var<workgroup> sf: array<vec4<f32>, BR * SF4>;

// Rounded to f16, saturating at +-65504 rather than turning into inf (which would make every
// score of a row NaN).
fn to_f16(v: vec4<f32>) -> vec4<f16> {
    return vec4<f16>(clamp(v, vec4<f32>(-65504.0), vec4<f32>(65504.0)));
}

// The K/V cache index of vec4 i of the block starting at position j0 of the tile's sequence;
// positions past the tile's last are its last again (masked in the softmax).
fn kv_index(table: SeqTable, kvh: u32, j0: u32, pos_last: u32, i: u32) -> u32 {
    let e = min(i, KV4 - 1u);
    return (kv_slot_in(table, min(j0 + e / D4, pos_last)) * HKV + kvh) * D4 + e % D4;
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let h = wg.x;
    let kvh = h / (HQ / HKV);
    let t0 = tile_first_row(wg.y);
    let rows = tile_rows(wg.y);
    let seq = row_seq(t0);
    let table = seq_table(seq);
    let kv_lo = seq_kv_lo(seq);
    let pos0 = row_pos(t0);
    let pos_last = pos0 + rows - 1u;
    for (var i = tid; i < BR * D4; i += WG_THREADS) {
        let r = i / D4;
        var v = vec4<f32>(0.0);
        if (r < rows) {
            v = q[((t0 + r) * HQ + h) * D4 + i % D4] * SCALE;
        }
        qs[r * KS4 + i % D4] = to_f16(v);
    }
    let sg = tid / SG;
    let lane = tid % SG;
    // This lane's row and its share of it: vec4s part, part + RPL, ...
    let r = sg * 16u + lane / RPL;
    let part = lane % RPL;
    let pos = pos0 + r;
    let lo = attend_lo(kv_lo, pos);
    let row_ok = r < rows;
    var m = -3.0e38;
    var row_sum = 0.0;
    var acc: array<vec4<f32>, OC4>;
    for (var c = 0u; c < OC4; c++) {
        acc[c] = vec4<f32>(0.0);
    }
    // A block's K and V values, loaded into registers one block ahead: their loads are in
    // flight while the previous block multiplies.
    let j_first = attend_lo(kv_lo, pos0);
    var kn: array<vec4<f32>, LOADS>;
    var vn: array<vec4<f32>, LOADS>;
    for (var u = 0u; u < LOADS; u++) {
        let at = kv_index(table, kvh, j_first, pos_last, tid + u * WG_THREADS);
        kn[u] = k_at(at);
        vn[u] = v_at(at);
    }
    for (var j0 = j_first; j0 <= pos_last; j0 += BC) {
        for (var u = 0u; u < LOADS; u++) {
            let i = tid + u * WG_THREADS;
            if (i < KV4) {
                ks[(i / D4) * KS4 + i % D4] = to_f16(kn[u]);
                vs[(i / D4) * KS4 + i % D4] = to_f16(vn[u]);
            }
        }
        workgroupBarrier();
        if (j0 + BC <= pos_last) {
            for (var u = 0u; u < LOADS; u++) {
                let at = kv_index(table, kvh, j0 + BC, pos_last, tid + u * WG_THREADS);
                kn[u] = k_at(at);
                vn[u] = v_at(at);
            }
        }
        // S = Q K^T: A is the subgroup's query rows, B the block's K rows read as columns.
        let s_at = sg * 16u * SF4;
        for (var c = 0u; c < BC / 16u; c++) {
            var s = coop_mat16x16<f32, C>();
            for (var d = 0u; d < HD / 16u; d++) {
                let stride = KS4;
                let pa = sg * 16u * KS4 + d * 4u;
                let pb = c * 16u * KS4 + d * 4u;
                let a = coopLoadT<coop_mat16x16<f16, A>>(&qs[pa], stride);
                let b = coopLoad<coop_mat16x16<f16, B>>(&ks[pb], stride);
                s = coopMultiplyAdd(a, b, s);
            }
            let s_stride = SF4;
            let ps_at = s_at + c * 4u;
            coopStoreT(s, &sf[ps_at], s_stride);
        }
        workgroupBarrier();
        // Online softmax: this lane's scores of its row, the row's max over its RPL lanes.
        var sv: array<vec4<f32>, SC4>;
        var mb = -3.0e38;
        for (var c = 0u; c < SC4; c++) {
            let g = c * RPL + part;
            let j = vec4<u32>(j0 + 4u * g) + vec4<u32>(0u, 1u, 2u, 3u);
            let ok = vec4<bool>(row_ok) & (j >= vec4<u32>(lo)) & (j <= vec4<u32>(pos));
            sv[c] = select(vec4<f32>(-3.0e38), sf[r * SF4 + g], ok);
            mb = max(mb, max(max(sv[c].x, sv[c].y), max(sv[c].z, sv[c].w)));
        }
        for (var x = 1u; x < RPL; x <<= 1u) {
            mb = max(mb, subgroupShuffleXor(mb, x));
        }
        let m_new = max(m, mb);
        let corr = exp(m - m_new);
        var ls = 0.0;
        for (var c = 0u; c < SC4; c++) {
            let p = select(vec4<f32>(0.0), exp(sv[c] - m_new), sv[c] > vec4<f32>(-1.0e38));
            ls += p.x + p.y + p.z + p.w;
            ps[r * PS4 + c * RPL + part] = vec4<f16>(p);
        }
        for (var x = 1u; x < RPL; x <<= 1u) {
            ls += subgroupShuffleXor(ls, x);
        }
        row_sum = row_sum * corr + ls;
        m = m_new;
        workgroupBarrier();
        // P V into the subgroup's rows of sf (its scores are read).
        for (var dc = 0u; dc < HD / 16u; dc++) {
            var pv = coop_mat16x16<f32, C>();
            for (var jc = 0u; jc < BC / 16u; jc++) {
                let pstride = PS4;
                let vstride = KS4;
                let pa = sg * 16u * PS4 + jc * 4u;
                let pb = jc * 16u * KS4 + dc * 4u;
                let a = coopLoadT<coop_mat16x16<f16, A>>(&ps[pa], pstride);
                let b = coopLoadT<coop_mat16x16<f16, B>>(&vs[pb], vstride);
                pv = coopMultiplyAdd(a, b, pv);
            }
            let pv_stride = SF4;
            let pv_at = s_at + dc * 4u;
            coopStoreT(pv, &sf[pv_at], pv_stride);
        }
        // Also what keeps the next block's staging from overwriting V while it is read.
        workgroupBarrier();
        for (var c = 0u; c < OC4; c++) {
            acc[c] = acc[c] * corr + sf[r * SF4 + c * RPL + part];
        }
    }
    if (row_ok) {
        let out = ((t0 + r) * HQ + h) * D4;
        for (var c = 0u; c < OC4; c++) {
            let v = acc[c] / row_sum;
            o[out + c * RPL + part] = v;
            store_f16x4(out + c * RPL + part, v);
        }
    }
}
