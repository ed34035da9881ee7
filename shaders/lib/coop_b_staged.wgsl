enable f16;
enable wgpu_cooperative_matrix;
// B fragments of lib/linear_coop_split from a TK-wide slice of W staged in workgroup memory as f16:
// any storage type through w_load8, so a quantized weight is dequantized once per workgroup.
// Rows of the slice are TS = TK + 8 values apart: the 16-byte skew spreads a fragment's rows
// over the memory banks (5% on the H200).
const W_STAGED: bool = true;
const TS: u32 = TK + 8u;

var<workgroup> ws: array<f16, TN * TS>;

fn stage_w(tid: u32, n0: u32, k0: u32) {
    // A constant trip count: the loop unrolls.
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
}

fn b_fragment(n: u32, n0: u32, k0: u32, kk: u32) -> coop_mat16x16<f16, B> {
    let i = n * TS + kk;
    let stride = TS;
    return coopLoad<coop_mat16x16<f16, B>>(&ws[i], stride);
}
