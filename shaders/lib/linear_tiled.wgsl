// Tiled matmul core for many rows (prefill): y[m, n] = sum_k x[m, k] * W[n, k].
// A workgroup computes a TM x TN tile; each thread an RM x RN micro-tile of consecutive columns,
// so output pairs (n, n+1) with n even reach the kernel's store_pair together.
// Needs from the kernel: x (array<XElem>), w (array<WElem>), step, store_pair(m, n, v0, v1);
// w_elem from lib/weight_rows; prepare_input / load_x4 from lib/input_plain or
// lib/input_rmsnorm; step_rows from lib/rows_of_step.
// Constants: K, N, TM, TN, TK, WG_X, WG_Y, RM = TM / WG_Y, RN = TN / WG_X.
alias XElem = vec4<f32>;

var<workgroup> xs: array<f32, TM * TK>;
var<workgroup> ws: array<f32, TK * TN>;

@compute @workgroup_size(WG_X, WG_Y)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let tid = lid.y * WG_X + lid.x;
    let m0 = wg.y * TM;
    let n0 = wg.x * TN;
    let rows = step_rows();
    prepare_input(tid, m0, min(TM, rows - min(rows, m0)));
    var acc: array<f32, RM * RN>;
    for (var k0 = 0u; k0 < K; k0 += TK) {
        // Constant trip counts (the host checks the divisions): the loops unroll and every
        // load is in flight before the first store waits for one.
        for (var j = 0u; j < TM * TK / 4u / (WG_X * WG_Y); j++) {
            let i = tid + j * WG_X * WG_Y;
            let m = i / (TK / 4u);
            let kq = (i % (TK / 4u)) * 4u;
            var v = vec4<f32>(0.0);
            if (m0 + m < rows && k0 + kq < K) {
                v = load_x4(m, m0 + m, k0 + kq);
            }
            let b = m * TK + kq;
            xs[b] = v.x;
            xs[b + 1u] = v.y;
            xs[b + 2u] = v.z;
            xs[b + 3u] = v.w;
        }
        for (var j = 0u; j < TN * TK / 4u / (WG_X * WG_Y); j++) {
            let i = tid + j * WG_X * WG_Y;
            let n = i / (TK / 4u);
            let kq = (i % (TK / 4u)) * 4u;
            var v = vec4<f32>(0.0);
            if (n0 + n < N && k0 + kq < K) {
                v = w_load4(w_elem(n0 + n, k0 + kq));
            }
            ws[kq * TN + n] = v.x;
            ws[(kq + 1u) * TN + n] = v.y;
            ws[(kq + 2u) * TN + n] = v.z;
            ws[(kq + 3u) * TN + n] = v.w;
        }
        workgroupBarrier();
        for (var kk = 0u; kk < TK; kk++) {
            var a: array<f32, RM>;
            for (var i = 0u; i < RM; i++) {
                a[i] = xs[(lid.y * RM + i) * TK + kk];
            }
            for (var j = 0u; j < RN; j++) {
                let b = ws[kk * TN + lid.x * RN + j];
                for (var i = 0u; i < RM; i++) {
                    acc[i * RN + j] += a[i] * b;
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < RM; i++) {
        let m = m0 + lid.y * RM + i;
        for (var j = 0u; j < RN; j += 2u) {
            let n = n0 + lid.x * RN + j;
            if (m < rows && n < N) {
                store_pair(m, n, acc[i * RN + j], acc[i * RN + j + 1u]);
            }
        }
    }
}
