// GEMV core for a few rows (batched decode: up to GEMV_ROWS sequences, a variant per
// GEMV_BATCH_ROWS entry in ops/linear.rs); one row takes lib/linear_gemv. y[m, n] = sum_k x[m, k] * W[n, k].
// A lane group (LANES threads) computes RPG consecutive outputs for up to GEMV_ROWS rows of x.
// Each lane takes 8 values of a weight row per step (one 16-byte load for f16), strided by
// LANES * 8 so the group reads each row coalesced; a step issues RPG independent loads and uses
// them for every row of x (llama.cpp's mul_mat_vec: each weight is read once per step, however
// many sequences decode in it). The group's partial sums of every row are reduced together
// with one barrier, and outputs reach the kernel's store_pair as pairs (n, n + 1).
// An RMSNorm of the input costs nothing extra: the group already reads all of x, so the lanes
// also sum x^2 of each row and its dot products are scaled by its 1/rms at the end; gamma
// scales the weights as they load (lib/gemv_input_*).
// Needs from the kernel: x (array<XElem>), w, step, store_pair; w_load8 from the weight
// piece; w_elem from lib/weight_rows; lanes_part, MAX_PARTS from lib/lanes_*; NORMED,
// gemv_weigh, gemv_scale from lib/gemv_input_*; step_rows from lib/rows_of_step.
// Constants: K (a multiple of 8), N, LANES, RPG (1, 2 or 4), WG_THREADS,
// GEMV_ROWS (rows of x per workgroup: a step of more rows takes one z of the grid per GEMV_ROWS);
// WG_ROWS is even.
alias XElem = vec4<f32>;

fn x_vec4(e: XElem) -> vec4<f32> {
    return e;
}

const GROUPS: u32 = WG_THREADS / LANES;
const WG_ROWS: u32 = GROUPS * RPG;
const STRIDE: u32 = LANES * 8u;
const CHUNKS: u32 = (K + STRIDE - 1u) / STRIDE;
// x^2 sums of four rows share a vec4 (one lane-group reduction for four rows).
const ROW_SETS: u32 = (GEMV_ROWS + 3u) / 4u;

// With RPG <= 2 two rows' sums share a vec4, so the lane groups reduce half as many vec4s: 8
// rows of the 896x4864 weight took 12.1 us against 18.0 on the H200 (docs/PERF.md).
const PACK: bool = RPG <= 2u;
const ROW_VECS: u32 = select(GEMV_ROWS, GEMV_ROWS / 2u, PACK);
// Sums reduced over lane groups: the rows' dot products (ROW_VECS vec4s), then (NORMED) x^2
// sums of four rows.
const SUMS: u32 = ROW_VECS + select(0u, ROW_SETS, NORMED);
// Shares of each sum, MAX_PARTS per lane group (lib/lanes_*).
var<workgroup> parts: array<vec4<f32>, SUMS * GROUPS * MAX_PARTS>;

// Row 0 of a workgroup's rows always exists (the grid's z covers the step's rows), so its work
// never waits for the step's row count: the weight loads and row 0 come before it.
fn has_row(m0: u32, j: u32, rows: u32) -> bool {
    return j == 0u || m0 + j < rows;
}

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
    let rows = step_rows();
    // Steps of more rows than the variant's: each z of the grid takes the next GEMV_ROWS rows,
    // reading the weight again (on the H200 the copies mostly meet in L2).
    let m0 = wg.z * GEMV_ROWS;
    var accs: array<vec4<f32>, GEMV_ROWS>;
    var ss: array<vec4<f32>, ROW_SETS>;
    let last = max(rows, 1u) - 1u;
    for (var c = 0u; c < CHUNKS; c++) {
        let k = c * STRIDE + lane * 8u;
        if (k < K) {
            var wv: array<W8, RPG>;
            for (var r = 0u; r < RPG; r++) {
                // Rows past N read row N - 1 (valid memory); their sums are never stored. A
                // normalizing input's gamma scales the weights, once for all rows.
                wv[r] = gemv_weigh(w_load8(w_elem(min(n0 + r, N - 1u), k)), k);
            }
            // Every row the variant is built for, without a condition, so that their loads
            // issue together; rows past the step's repeat its last row and are never stored.
            for (var j = 0u; j < GEMV_ROWS; j++) {
                let i = (min(m0 + j, last) * K + k) / 4u;
                let xr = W8(x[i], x[i + 1u]);
                // Each row's x^2 sum is taken by one lane group (j % GROUPS), not by all.
                if (j % GROUPS == g) {
                    ss[j / 4u][j % 4u] += dot8(xr, xr);
                }
                for (var r = 0u; r < RPG; r++) {
                    accs[j][r] += dot8(wv[r], xr);
                }
            }
        }
    }
    // Every row's sums (and x^2 sums) meet with one barrier: each part of a lane group
    // (lanes_part) leaves its share in workgroup memory, then the invocation of each output pair
    // adds the shares of its two sums (and of its row's x^2 sum) and stores the pair. Adding the
    // shares into workgroup memory first, behind a second barrier, cost B=8 4% on the H100
    // (docs/PERF.md). Summing all GEMV_ROWS rows whatever the step's count keeps
    // the subgroup operations out of branches (rows past it hold zeros): per-row reductions
    // behind conditions and barriers made 8 rows take 1.5x as long (docs/PERF.md).
    let part = LANES / MAX_PARTS;
    for (var j = 0u; j < SUMS; j++) {
        var v = vec4<f32>(0.0);
        if (j < ROW_VECS) {
            if (PACK) {
                v = vec4<f32>(accs[2u * j].xy, accs[2u * j + 1u].xy);
            } else {
                v = accs[j];
            }
        } else if (NORMED) {
            v = ss[j - ROW_VECS];
        }
        let s = lanes_part(lid, lane, v);
        if (lane % part == 0u) {
            parts[(j * GROUPS + g) * MAX_PARTS + lane / part] = s;
        }
    }
    workgroupBarrier();
    for (var p = lid; p < GEMV_ROWS * WG_ROWS / 2u; p += WG_THREADS) {
        let j = p / (WG_ROWS / 2u);
        let o = (p % (WG_ROWS / 2u)) * 2u;
        let n = group * WG_ROWS + o;
        if (has_row(m0, j, rows) && n < N) {
            var scale = 1.0;
            if (NORMED) {
                var nss = vec4<f32>(0.0);
                for (var q = 0u; q < MAX_PARTS; q++) {
                    nss += parts[((ROW_VECS + j / 4u) * GROUPS + j % GROUPS) * MAX_PARTS + q];
                }
                scale = gemv_scale(nss[j % 4u]);
            }
            store_pair(m0 + j, n, out_sum(j, o) * scale, out_sum(j, o + 1u) * scale);
        }
    }
}

// Row j's sum for this workgroup's output o: its lane group's parts added.
fn out_sum(j: u32, o: u32) -> f32 {
    let gg = o / RPG;
    let jv = select(j, j / 2u, PACK);
    var t = vec4<f32>(0.0);
    for (var q = 0u; q < MAX_PARTS; q++) {
        t += parts[(jv * GROUPS + gg) * MAX_PARTS + q];
    }
    return t[select(0u, (j % 2u) * 2u, PACK) + o % RPG];
}
