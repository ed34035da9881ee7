// GEMV core for one or a few rows (decode): y[m, n] = sum_k x[m, k] * W[n, k].
// A workgroup computes R output columns; LANES threads share one weight row and read it
// coalesced, then reduce. Results reach the kernel's store_pair in pairs (n, n+1), n even.
// Needs from the kernel: x, w, step, store_pair; lanes_sum from lib/lanes_portable or
// lib/lanes_subgroup; prepare_input / load_x4 from lib/input_plain or lib/input_rmsnorm. Constants: K, N, R (even), LANES, WG_THREADS = R * LANES.
var<workgroup> row_sums: array<f32, R>;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Large outputs (an LM head) need more than 65535 workgroups: the grid is 2-D.
    let group = wg.y * groups.x + wg.x;
    let r = lid / LANES;
    let lane = lid % LANES;
    let n = group * R + r;
    let rows = select(1u, step.n_tokens, ROWS_FROM_STEP);
    prepare_input(lid, 0u, rows);
    for (var m = 0u; m < rows; m++) {
        var acc = 0.0;
        if (n < N) {
            for (var k = lane * 4u; k < K; k += LANES * 4u) {
                acc += dot(w_load4(n * K + k), load_x4(m, m, k));
            }
        }
        let total = lanes_sum(lid, lane, acc);
        if (lane == 0u) {
            row_sums[r] = total;
        }
        workgroupBarrier();
        if (lid < R / 2u) {
            let n2 = group * R + lid * 2u;
            if (n2 < N) {
                store_pair(m, n2, row_sums[lid * 2u], row_sums[lid * 2u + 1u]);
            }
        }
        workgroupBarrier();
    }
}
