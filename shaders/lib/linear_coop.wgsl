enable f16;
enable wgpu_cooperative_matrix;
// Tensor-core matmul core for many rows: y[m, n] = sum_k x[m, k] * W[n, k], through cooperative
// matrices (16x16 f16 fragments, f32 accumulation). A workgroup computes a TM x TN tile with
// SGM x SGN x SGK subgroups: each owns a 32 x 32 block of the tile (2 x 2 fragments), and the
// SGK subgroups sharing a block take turns over the 16-wide k steps of each
// stage (split-K: few tiles still give every SM subgroups enough to hide latency); their sums
// meet in workgroup memory at the end. Where a step has few tiles and long rows (the down
// projection: 112 tiles of k 4864 for a 512-row step), k is split once more over the grid's z
// (lib/split_k): one workgroup's loop over the stages is a chain of loads, each waiting for
// memory, that other workgroups on its SM would otherwise hide.
// Both operands are staged through workgroup memory TK columns at a time (16-byte loads from
// storage; rows 16 bytes longer than TK, so a fragment's rows fall on different banks); while a
// stage multiplies, the next one's values are loaded into registers. The stage is an array of
// vec4<f16>, so each 8 values go in as two 8-byte stores (eight 2-byte ones made H200 prefill
// 512 22% slower), and the fragment loads' indices and strides count vec4s. x arrives as f16
// rows (ops/input_f16 wrote them, RMS-normalized where the kernel has a norm); W's values come from lib/coop_w_* (f16 as stored, or dequantized).
// A finished fragment goes through workgroup memory once more so the kernel's store_pair (bias,
// RoPE, SwiGLU, residual) sees plain (m, n) pairs.
// Needs from the kernel: x (array<XElem>), w, step, store_pair(m, n, v0, v1); from lib/coop_w_*:
// w_vals(e); step_rows from lib/rows_of_step; lib/split_k. Constants: K and N (multiples of 16), SGM, SGN, SGK,
// TM = 32 * SGM, TN = 32 * SGN,
// TK (a multiple of 16 * SGK),
// SG (the subgroup size), WG_THREADS = SGM * SGN * SGK * SG.
// x holds whole TM-row tiles: rows past the step's are read, and their outputs never stored.
alias XElem = vec4<f16>;

// Eight consecutive f16 values.
struct H8 {
    lo: vec4<f16>,
    hi: vec4<f16>,
}

// Values per staged row: TK and 8 more (16 bytes) of skew.
const RS: u32 = TK + 8u;
// The W rows of a stage start after its TM x rows.
const W_BASE: u32 = TM * RS;
// vec4s in 16 staged rows: one fragment's rows.
const FRAG: u32 = 4u * RS;
// 8-value chunks per stage, and per thread.
const CHUNKS: u32 = (TM + TN) * (TK / 8u);
const LOADS: u32 = (CHUNKS + WG_THREADS - 1u) / WG_THREADS;
const SUBGROUPS: u32 = SGM * SGN * SGK;

var<workgroup> stage: array<vec4<f16>, (TM + TN) * RS / 4u>;
// One 16 x 16 f32 fragment per subgroup, for the k shares' sums and the stores. frag[0] also
// passes a split's arrival count: no other workgroup variable sits beside the f32 array the
// fragments are stored to (a u32 beside one shifted the NVIDIA driver's coopStoreT by a value,
// lib/linear_coop_split).
var<workgroup> frag: array<f32, SUBGROUPS * 256u>;

// Chunk i (8 values) of the stage at k0: the TM rows of x, then the TN rows of W.
fn stage_vals(i: u32, m0: u32, n0: u32, k0: u32) -> H8 {
    let r = i / (TK / 8u);
    let k = k0 + (i % (TK / 8u)) * 8u;
    if (i >= CHUNKS || k >= K) {
        return H8(vec4<f16>(0.0), vec4<f16>(0.0));
    }
    if (r < TM) {
        let e = ((m0 + r) * K + k) / 4u;
        return H8(x[e], x[e + 1u]);
    }
    // Rows past N reread the last one; the outputs they feed are never stored.
    return w_vals(min(n0 + r - TM, N - 1u) * K + k);
}

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let m0 = wg.y * TM;
    let n0 = wg.x * TN;
    let rows = step_rows();
    let k_range = split_k_range(wg.z, groups.z);
    // This subgroup's block of the tile, and its share of k.
    let sg = tid / SG;
    let block = sg % (SGM * SGN);
    let ks = sg / (SGM * SGN);
    let bm = (block / SGN) * 32u;
    let bn = (block % SGN) * 32u;
    // The block's 2 x 2 fragments, in named variables: an array of them indexed in a loop
    // the driver does not unroll would live in memory.
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    var next: array<H8, LOADS>;
    for (var j = 0u; j < LOADS; j++) {
        next[j] = stage_vals(tid + j * WG_THREADS, m0, n0, k_range.x);
    }
    for (var k0 = k_range.x; k0 < k_range.y; k0 += TK) {
        for (var j = 0u; j < LOADS; j++) {
            let i = tid + j * WG_THREADS;
            if (i < CHUNKS) {
                let b = ((i / (TK / 8u)) * RS + (i % (TK / 8u)) * 8u) / 4u;
                stage[b] = next[j].lo;
                stage[b + 1u] = next[j].hi;
            }
        }
        workgroupBarrier();
        // The next stage's words load while this one multiplies.
        if (k0 + TK < k_range.y) {
            for (var j = 0u; j < LOADS; j++) {
                next[j] = stage_vals(tid + j * WG_THREADS, m0, n0, k0 + TK);
            }
        }
        // A constant trip count: the loop unrolls.
        for (var t = 0u; t < TK / 16u / SGK; t++) {
            let kk = (t * SGK + ks) * 16u;
            // Every index and stride is a `let` of its own: naga's coop loads need them
            // evaluated first. Indices and the stride count vec4s (FRAG: 16 rows of them).
            let stride = RS / 4u;
            let pa = (bm * RS + kk) / 4u;
            let pa1 = pa + FRAG;
            let pb = (W_BASE + bn * RS + kk) / 4u;
            let pb1 = pb + FRAG;
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&stage[pa], stride);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&stage[pa1], stride);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&stage[pb], stride);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&stage[pb1], stride);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }
    // One fragment at a time: every subgroup stores its share, the first k share's lanes add
    // the others and store the pairs (or publish them, one split of several).
    let splits = groups.z;
    let tile_id = wg.y * groups.x + wg.x;
    let own = split_at(tile_id, splits, wg.z);
    store_fragment(c00, tid, bm, bn, m0, n0, rows, splits, own);
    store_fragment(c01, tid, bm, bn + 16u, m0, n0, rows, splits, own);
    store_fragment(c10, tid, bm + 16u, bn, m0, n0, rows, splits, own);
    store_fragment(c11, tid, bm + 16u, bn + 16u, m0, n0, rows, splits, own);
    if (splits == 1u) {
        return;
    }
    storageBarrier();
    if (tid == 0u) {
        frag[0] = f32(split_arrive(tile_id));
    }
    if (u32(workgroupUniformLoad(&frag[0])) != splits - 1u) {
        return;
    }
    storageBarrier();
    store_tile(tid, tile_id, splits, m0, n0, rows);
}

// A finished pair of a split tile (lib/split_k's store_tile runs only after splits).
fn tile_pair(tile_id: u32, splits: u32, t: u32) -> vec2<f32> {
    return split_total(tile_id, splits, t);
}

// Stores the 16 x 16 outputs at (fm, fn_) of the tile at (m0, n0), from the block whose k shares
// hold c, or publishes them at `sums_at` where the tile's k is split (called by every invocation:
// it has barriers).
fn store_fragment(
    c: coop_mat16x16<f32, C>,
    tid: u32,
    fm: u32,
    fn_: u32,
    m0: u32,
    n0: u32,
    rows: u32,
    splits: u32,
    sums_at: u32,
) {
    let sg = tid / SG;
    let stride = 16u;
    let mine = sg * 256u;
    coopStoreT(c, &frag[mine], stride);
    workgroupBarrier();
    if (sg < SGM * SGN) {
        for (var p = tid % SG; p < 128u; p += SG) {
            let m = p / 8u;
            let n = (p % 8u) * 2u;
            var v = vec2<f32>(0.0);
            for (var s = 0u; s < SGK; s++) {
                let t = mine + s * SGM * SGN * 256u + m * 16u + n;
                v += vec2<f32>(frag[t], frag[t + 1u]);
            }
            if (splits > 1u) {
                split_publish(sums_at, (fm + m) * TN + fn_ + n, v);
            } else if (m0 + fm + m < rows && n0 + fn_ + n < N) {
                store_pair(m0 + fm + m, n0 + fn_ + n, v.x, v.y);
            }
        }
    }
    workgroupBarrier();
}
