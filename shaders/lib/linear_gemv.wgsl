// GEMV core for one row (a single sequence's decode): y[n] = sum_k x[k] * W[n, k]; more rows
// take lib/linear_gemv_batch. Kept apart from it because the row count known at compile time
// lets the driver keep everything in registers: the batched core built for one row was 15-38%
// slower on the H200 (docs/PERF.md).
// A lane group (LANES threads) computes RPG consecutive outputs. Each lane takes a run of W_RUN
// values of a weight row per step (8 for most weights: one 16-byte load for f16; an LM head's
// Q4_K runs are chunks of 64 whose quant and scale words are read once), strided by LANES *
// W_RUN so the group reads each row coalesced; a step issues RPG independent runs and reuses
// each 8 x values for all of them. The group's partial sums are reduced by lanes_part (subgroup
// shuffles where the adapter has them), whose parts meet after one barrier, and outputs reach
// the kernel's store_pair as pairs (n, n + 1).
// An RMSNorm of the input costs nothing extra: the group already reads all of x, so the lanes
// also sum x^2 and the dot products are scaled by 1/rms at the end (lib/gemv_input_*).
// Needs from the kernel: x (array<XElem>), w, store_pair (the step's values are not read);
// W_RUN, WRun, w_run, w_run8 from a run piece (lib/weight_run8, lib/weight_run8_ahead, or a
// type's long runs: ops/weight.rs); w_elem from lib/weight_rows (a long run only on rows stored
// row after row: it may span the grouped layout's 32-value groups); lanes_part, MAX_PARTS from
// lib/lanes_*; NORMED, gemv_weigh, gemv_scale from lib/gemv_input_*.
// Constants: K (a multiple of W_RUN), N, LANES, RPG (1, 2 or 4), WG_THREADS; WG_ROWS is even.
alias XElem = vec4<f32>;

fn x_vec4(e: XElem) -> vec4<f32> {
    return e;
}

const GROUPS: u32 = WG_THREADS / LANES;
const WG_ROWS: u32 = GROUPS * RPG;
const STRIDE: u32 = LANES * W_RUN;
const CHUNKS: u32 = (K + STRIDE - 1u) / STRIDE;

// A lane's sums as vec4s: its RPG dot products, and (NORMED) its x^2 sum, in the first vec4's
// spare last value where RPG < 4: one reduction instead of two, and one barrier where a group
// spans several parts. With the x^2 sum reduced apart and each reduction of a 128-lane group
// behind barriers of its own, Qwen2.5-0.5B decoded 2-3% slower on the H100 (docs/PERF.md).
const SS_APART: bool = NORMED && RPG == 4u;
const VECS: u32 = select(1u, 2u, SS_APART);
// Each part's sums: vec4 i of lane group g's part q at (i * GROUPS + g) * MAX_PARTS + q.
var<workgroup> parts: array<vec4<f32>, VECS * GROUPS * MAX_PARTS>;

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    // Large outputs (an LM head) need more than 65535 workgroups: the grid is 2-D.
    let group = wg.y * groups.x + wg.x;
    let g = lid / LANES;
    let lane = lid % LANES;
    let n0 = group * WG_ROWS + g * RPG;
    var acc = vec4<f32>(0.0);
    var ss = 0.0;
    for (var c = 0u; c < CHUNKS; c++) {
        let k0 = c * STRIDE + lane * W_RUN;
        if (k0 < K) {
            // Rows past N read row N - 1 (valid memory); their sums are never stored.
            var runs: array<WRun, RPG>;
            for (var r = 0u; r < RPG; r++) {
                runs[r] = w_run(w_elem(min(n0 + r, N - 1u), k0));
            }
            for (var p = 0u; p < W_RUN / 8u; p++) {
                let k = k0 + p * 8u;
                let i = k / 4u;
                let xr = W8(x[i], x[i + 1u]);
                ss += dot8(xr, xr);
                let xv = gemv_weigh(xr, k);
                for (var r = 0u; r < RPG; r++) {
                    acc[r] += dot8(w_run8(runs[r], p), xv);
                }
            }
        }
    }
    if (NORMED && !SS_APART) {
        acc.w = ss;
    }
    let part = LANES / MAX_PARTS;
    for (var i = 0u; i < VECS; i++) {
        let sum = lanes_part(lid, lane, select(acc, vec4<f32>(ss, 0.0, 0.0, 0.0), i == 1u));
        if (lane % part == 0u) {
            parts[(i * GROUPS + g) * MAX_PARTS + lane / part] = sum;
        }
    }
    workgroupBarrier();
    if (lid < WG_ROWS / 2u) {
        let n = group * WG_ROWS + lid * 2u;
        if (n < N) {
            store_pair(0u, n, output(lid * 2u), output(lid * 2u + 1u));
        }
    }
}

// Output o of this workgroup, from its lane group's parts after the barrier.
fn output(o: u32) -> f32 {
    let g = o / RPG;
    var sums = vec4<f32>(0.0);
    var ss = 0.0;
    for (var q = 0u; q < MAX_PARTS; q++) {
        sums += parts[g * MAX_PARTS + q];
        if (SS_APART) {
            ss += parts[(GROUPS + g) * MAX_PARTS + q].x;
        }
    }
    if (!NORMED) {
        return sums[o % RPG];
    }
    return sums[o % RPG] * gemv_scale(select(sums.w, ss, SS_APART));
}
