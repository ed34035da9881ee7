enable f16;
enable wgpu_cooperative_matrix;
// Tensor-core matmul core for steps of few rows (Core::Split: 17 to 256 rows where the prefill
// core's tiles would be too few, ops/linear.rs split_runs): y[m, n] = sum_k x[m, k] * W[n, k],
// through cooperative matrices (16x16 f16 fragments, f32 accumulation). A workgroup computes a
// TM x TN tile with SGM x SGN x SGK subgroups: each 32 x 32 block (2 x 2 accumulators) is
// shared by SGK subgroups taking every SGK-th 16-wide step of k, whose sums meet in workgroup
// memory.
// k is split once more over the grid's z (lib/split_k): with few tiles a workgroup's loop is a
// chain of dependent loads (~0.9 us per step on the H200), so a weight of few outputs and long
// rows spreads its k slices (TK wide) over more workgroups.
// Fragments load straight from storage (x as f16 rows from ops/input_f16): with so few rows,
// staging them through workgroup memory as lib/linear_coop does made these steps slower on
// the H200 (896x4864 at 8 to 64 rows: 84 us against 43, docs/PERF.md). B fragments come from
// lib/coop_b_* (straight from f16 weights, or from a dequantized slice in workgroup memory). The
// finished tile goes through workgroup memory once more so the kernel's store_pair (bias, RoPE,
// SwiGLU, residual) sees plain (m, n) pairs.
// Needs from the kernel: x (array<XElem>), w, step, store_pair(m, n, v0, v1); from lib/coop_b_*:
// W_STAGED, stage_w, b_fragment; step_rows from lib/rows_of_step; lib/split_k. Constants: K
// and N (multiples of 16), TM = 32 * SGM, TN = 32 * SGN, SGK, TK (a multiple of 16 * SGK), SG
// (the subgroup size), WG_THREADS = SGM * SGN * SGK * SG.
// x holds whole TM-row tiles: rows past the step's are read, and their outputs never stored.
alias XElem = f16;

const BLOCKS: u32 = TM / 32u * SGN;

// No other workgroup variable: one declared beside it (a u32) shifted the NVIDIA driver's
// coopStoreT into it by a value (every output read its neighbour's sum), so a split's arrival
// count passes through tile[0].
var<workgroup> tile: array<f32, SGK * TM * TN>;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) tid: u32,
) {
    let m0 = wg.y * TM;
    let n0 = wg.x * TN;
    let rows = step_rows();
    // This subgroup's 32 x 32 block of the tile, and its share of k.
    let sg = tid / SG;
    let block = sg % BLOCKS;
    let ks = sg / BLOCKS;
    let bm = (block / SGN) * 32u;
    let bn = (block % SGN) * 32u;
    let k_range = split_k_range(wg.z, groups.z);
    let k_lo = k_range.x;
    let k_hi = k_range.y;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    if (W_STAGED) {
        for (var k0 = k_lo; k0 < k_hi; k0 += TK) {
            stage_w(tid, n0, k0);
            workgroupBarrier();
            for (var kk = ks * 16u; kk < min(TK, K - k0); kk += SGK * 16u) {
                // x rows are row-major: A fragments load transposed. Every index and stride is
                // a `let` of its own: naga's coop loads and stores need them evaluated first.
                let ia0 = (m0 + bm) * K + k0 + kk;
                let ia1 = ia0 + 16u * K;
                let stride = K;
                let a0 = coopLoadT<coop_mat16x16<f16, A>>(&x[ia0], stride);
                let a1 = coopLoadT<coop_mat16x16<f16, A>>(&x[ia1], stride);
                let b0 = b_fragment(bn, n0, k0, kk);
                let b1 = b_fragment(bn + 16u, n0, k0, kk);
                c00 = coopMultiplyAdd(a0, b0, c00);
                c01 = coopMultiplyAdd(a0, b1, c01);
                c10 = coopMultiplyAdd(a1, b0, c10);
                c11 = coopMultiplyAdd(a1, b1, c11);
            }
            workgroupBarrier();
        }
    } else {
        // Fragments straight from storage: the next step's load while this step multiplies
        // (a latency-bound loop otherwise: 896x4864 at 8 rows took 139 us against 78 on the
        // H200, prefill 512 gained 4%). The last step's prefetch rereads the last fragments.
        let stride = K;
        let k_first = min(k_lo + ks * 16u, K - 16u);
        let i0 = (m0 + bm) * K + k_first;
        let i1 = i0 + 16u * K;
        var a0 = coopLoadT<coop_mat16x16<f16, A>>(&x[i0], stride);
        var a1 = coopLoadT<coop_mat16x16<f16, A>>(&x[i1], stride);
        var b0 = b_fragment(bn, n0, 0u, k_first);
        var b1 = b_fragment(bn + 16u, n0, 0u, k_first);
        for (var k = k_lo + ks * 16u; k < k_hi; k += SGK * 16u) {
            let kn = min(k + SGK * 16u, K - 16u);
            let ia0 = (m0 + bm) * K + kn;
            let ia1 = ia0 + 16u * K;
            let na0 = coopLoadT<coop_mat16x16<f16, A>>(&x[ia0], stride);
            let na1 = coopLoadT<coop_mat16x16<f16, A>>(&x[ia1], stride);
            let nb0 = b_fragment(bn, n0, 0u, kn);
            let nb1 = b_fragment(bn + 16u, n0, 0u, kn);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
            a0 = na0;
            a1 = na1;
            b0 = nb0;
            b1 = nb1;
        }
    }
    let stride = TN;
    let o00 = ks * TM * TN + bm * TN + bn;
    let o01 = o00 + 16u;
    let o10 = o00 + 16u * TN;
    let o11 = o10 + 16u;
    let r00 = c00;
    let r01 = c01;
    let r10 = c10;
    let r11 = c11;
    coopStoreT(r00, &tile[o00], stride);
    coopStoreT(r01, &tile[o01], stride);
    coopStoreT(r10, &tile[o10], stride);
    coopStoreT(r11, &tile[o11], stride);
    workgroupBarrier();
    let splits = groups.z;
    let tile_id = wg.y * groups.x + wg.x;
    if (splits > 1u) {
        let own = split_at(tile_id, splits, wg.z);
        for (var i = tid; i < TM * TN / 2u; i += WG_THREADS) {
            let t = (i / (TN / 2u)) * TN + (i % (TN / 2u)) * 2u;
            split_publish(own, t, tile_sum(t));
        }
        storageBarrier();
        workgroupBarrier(); // every thread has read its sums from the tile
        if (tid == 0u) {
            tile[0] = f32(split_arrive(tile_id));
        }
        if (u32(workgroupUniformLoad(&tile[0])) != splits - 1u) {
            return;
        }
        storageBarrier();
    }
    store_tile(tid, tile_id, splits, m0, n0, rows);
}

// The finished pair at t (= m * TN + n) of a tile: this workgroup's, or its splits' sums.
fn tile_pair(tile_id: u32, splits: u32, t: u32) -> vec2<f32> {
    if (splits == 1u) {
        return tile_sum(t);
    }
    return split_total(tile_id, splits, t);
}

// The k shares' sums of the output pair at t (= m * TN + n) of this workgroup's tile.
fn tile_sum(t: u32) -> vec2<f32> {
    var v = vec2<f32>(0.0);
    for (var s = 0u; s < SGK; s++) {
        let i = s * TM * TN + t;
        v += vec2<f32>(tile[i], tile[i + 1u]);
    }
    return v;
}
