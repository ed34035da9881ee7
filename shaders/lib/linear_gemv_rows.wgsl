// GEMV core for one row on CPU adapters (lavapipe): y[n] = sum_k x[k] * W[n, k], each lane of
// one subgroup-sized workgroup owning RPG whole rows of W, so no sum ever crosses lanes and no
// barrier is needed. On such an adapter a workgroup is a loop over SIMD vectors, a load whose
// address differs by lane is a scalar load per lane (with its own bounds check), and an address
// the same for all lanes is no cheaper unless it is a constant; the cost is the number of loads.
// So each 32-value block of x is loaded once per workgroup, a vec4 per lane, and handed to every
// lane by subgroupBroadcast (a register move), and each weight block is read by w_dot32 in as
// few loads as its type allows (a Q4_1 block: five words, against sixteen through w_load8).
// SmolLM2's 3072x576 Q4_1 weight on lavapipe: 1.38 -> 0.29-0.54 ms against lib/linear_gemv, its
// 49152x576 Q8_0 LM head 23.5 -> 19.2 ms (docs/PERF.md).
// Needs from the kernel: x (array<XElem>), w, store_pair; w_dot32 from the weight piece (or
// lib/weight_dot32); NORMED, gemv_weigh4, gemv_scale from lib/gemv_input_*.
// Constants: K (a multiple of 32), N, RPG (2 or 4), WG_THREADS (8: the subgroup size, so lane
// j's vec4 is values 4j .. 4j + 3 of the block).
alias XElem = vec4<f32>;

const WG_ROWS: u32 = WG_THREADS * RPG;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    // Large outputs (an LM head) need more than 65535 workgroups: the grid is 2-D.
    let group = wg.y * groups.x + wg.x;
    let n0 = group * WG_ROWS + lane * RPG;
    var acc = vec4<f32>(0.0);
    var ss = 0.0;
    for (var c = 0u; c < K / 32u; c++) {
        let k = c * 32u;
        let xl = x[k / 4u + lane];
        ss += dot(xl, xl);
        let xv = gemv_weigh4(xl, k + 4u * lane);
        var xb: X32;
        xb.v0 = W8(subgroupBroadcast(xv, 0u), subgroupBroadcast(xv, 1u));
        xb.v1 = W8(subgroupBroadcast(xv, 2u), subgroupBroadcast(xv, 3u));
        xb.v2 = W8(subgroupBroadcast(xv, 4u), subgroupBroadcast(xv, 5u));
        xb.v3 = W8(subgroupBroadcast(xv, 6u), subgroupBroadcast(xv, 7u));
        let s = xb.v0.lo + xb.v0.hi + xb.v1.lo + xb.v1.hi + xb.v2.lo + xb.v2.hi + xb.v3.lo + xb.v3.hi;
        xb.sum = dot(s, vec4<f32>(1.0));
        for (var r = 0u; r < RPG; r++) {
            // Rows past N read row N - 1 (valid memory); their sums are never stored.
            acc[r] += w_dot32(min(n0 + r, N - 1u) * K + k, xb);
        }
    }
    if (NORMED) {
        ss += subgroupShuffleXor(ss, 1u);
        ss += subgroupShuffleXor(ss, 2u);
        ss += subgroupShuffleXor(ss, 4u);
        acc *= gemv_scale(ss);
    }
    for (var r = 0u; r < RPG; r += 2u) {
        if (n0 + r < N) {
            store_pair(0u, n0 + r, acc[r], acc[r + 1u]);
        }
    }
}
