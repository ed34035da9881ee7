enable f16;
enable wgpu_cooperative_matrix;
// B fragments of lib/linear_coop_split straight from f16 weights: W rows [n][k] are B = W^T stored
// column-major, K apart. Fragments past N reread the last 16 rows (N % 16 == 0); the outputs
// they feed are never stored.
alias WElem = f16;

const W_STAGED: bool = false;

fn stage_w(tid: u32, n0: u32, k0: u32) {}

fn b_fragment(n: u32, n0: u32, k0: u32, kk: u32) -> coop_mat16x16<f16, B> {
    let i = min(n0 + n, N - 16u) * K + k0 + kk;
    let stride = K;
    return coopLoad<coop_mat16x16<f16, B>>(&w[i], stride);
}
