enable f16;
enable wgpu_cooperative_matrix;
// Tensor-core matmul core for many rows (prefill): y[m, n] = sum_k x[m, k] * W[n, k], through
// cooperative matrices (16x16 f16 fragments, f32 accumulation). A workgroup computes a
// TM x TN tile with SGM x SGN subgroups, each owning a 32 x 32 block (2 x 2 accumulators).
// Per TK-wide slice of k all threads stage x (normalized by lib/input_*, as f16) and W (any
// storage type through w_load8, as f16) in workgroup memory; each subgroup then multiplies
// fragments from there. The finished tile goes through workgroup memory once more so the
// kernel's store_pair (bias, RoPE, SwiGLU, residual) sees plain (m, n) pairs.
// Needs from the kernel: x (array<vec4<f32>>), w, step, store_pair(m, n, v0, v1);
// prepare_input / load_x4 from lib/input_*. Constants: K (a multiple of 8), N, TM = 32 * SGM,
// TN = 32 * SGN, TK (a multiple of 16), SG (the subgroup size), WG_THREADS = SGM * SGN * SG
// (dividing TM * TK / 4 and TN * TK / 8).
// Rows of the staged slices are TS = TK + 8 values apart: the 16-byte skew spreads a
// fragment's rows over the memory banks (measured 5% faster on the H200).
const TS: u32 = TK + 8u;
var<workgroup> xs: array<f16, TM * TS>;
var<workgroup> ws: array<f16, TN * TS>;
var<workgroup> tile: array<f32, TM * TN>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
    let m0 = wg.y * TM;
    let n0 = wg.x * TN;
    let rows = select(1u, step.n_tokens, ROWS_FROM_STEP);
    prepare_input(tid, m0, min(TM, rows - min(rows, m0)));
    // This subgroup's 32 x 32 block of the tile.
    let sg = tid / SG;
    let bm = (sg / SGN) * 32u;
    let bn = (sg % SGN) * 32u;
    var c00 = coop_mat16x16<f32, C>();
    var c01 = coop_mat16x16<f32, C>();
    var c10 = coop_mat16x16<f32, C>();
    var c11 = coop_mat16x16<f32, C>();
    for (var k0 = 0u; k0 < K; k0 += TK) {
        // Constant trip counts: the loops unroll and every load is in flight before the
        // first store waits for one.
        for (var j = 0u; j < TM * TK / 4u / WG_THREADS; j++) {
            let i = tid + j * WG_THREADS;
            let m = i / (TK / 4u);
            let kq = (i % (TK / 4u)) * 4u;
            var v = vec4<f32>(0.0);
            if (m0 + m < rows && k0 + kq < K) {
                // f16 tops out at 65504: saturate rather than turn an outlier into inf.
                v = clamp(load_x4(m, m0 + m, k0 + kq), vec4<f32>(-65504.0), vec4<f32>(65504.0));
            }
            let b = m * TS + kq;
            xs[b] = f16(v.x);
            xs[b + 1u] = f16(v.y);
            xs[b + 2u] = f16(v.z);
            xs[b + 3u] = f16(v.w);
        }
        for (var j = 0u; j < TN * TK / 8u / WG_THREADS; j++) {
            let i = tid + j * WG_THREADS;
            let n = i / (TK / 8u);
            let k8 = (i % (TK / 8u)) * 8u;
            var v = W8(vec4<f32>(0.0), vec4<f32>(0.0));
            if (n0 + n < N && k0 + k8 < K) {
                v = w_load8((n0 + n) * K + k0 + k8);
            }
            let b = n * TS + k8;
            ws[b] = f16(v.lo.x);
            ws[b + 1u] = f16(v.lo.y);
            ws[b + 2u] = f16(v.lo.z);
            ws[b + 3u] = f16(v.lo.w);
            ws[b + 4u] = f16(v.hi.x);
            ws[b + 5u] = f16(v.hi.y);
            ws[b + 6u] = f16(v.hi.z);
            ws[b + 7u] = f16(v.hi.w);
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk += 16u) {
            // x rows are row-major in xs; W rows [n][k] are B = W^T stored column-major.
            let a0 = coopLoadT<coop_mat16x16<f16, A>>(&xs[bm * TS + kk], TS);
            let a1 = coopLoadT<coop_mat16x16<f16, A>>(&xs[(bm + 16u) * TS + kk], TS);
            let b0 = coopLoad<coop_mat16x16<f16, B>>(&ws[bn * TS + kk], TS);
            let b1 = coopLoad<coop_mat16x16<f16, B>>(&ws[(bn + 16u) * TS + kk], TS);
            c00 = coopMultiplyAdd(a0, b0, c00);
            c01 = coopMultiplyAdd(a0, b1, c01);
            c10 = coopMultiplyAdd(a1, b0, c10);
            c11 = coopMultiplyAdd(a1, b1, c11);
        }
        workgroupBarrier();
    }
    // Every index and stride a `let` of its own: naga's coopStore needs them evaluated first.
    let stride = TN;
    let o00 = bm * TN + bn;
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
    for (var i = tid; i < TM * TN / 2u; i += WG_THREADS) {
        let m = i / (TN / 2u);
        let n = (i % (TN / 2u)) * 2u;
        if (m0 + m < rows && n0 + n < N) {
            store_pair(m0 + m, n0 + n, tile[m * TN + n], tile[m * TN + n + 1u]);
        }
    }
}
