// Linear core for CPU adapters (lavapipe): y[m, n] = sum_k x[m, k] * W[n, k] for XROWS rows of
// x per workgroup (1: the one-row GEMV of decode; more: batched decode and prefill), each lane
// of one subgroup-sized workgroup owning RPG whole rows of W, so no sum ever crosses lanes and
// no barrier is needed. On such an adapter a workgroup is a loop over SIMD vectors, a load whose
// address differs by lane is a scalar load per lane (with its own bounds check), and an address
// the same for all lanes is no cheaper unless it is a constant; the cost is the number of loads.
// So each 32-value block of a row of x is loaded once per workgroup, four values per lane (two
// u64 loads, as gamma's), and handed to every lane by subgroup shuffles, and each weight block is
// read by w_block32 in as few loads as its type allows (a Q4_1 block: three u64s, against
// sixteen u32s through w_load8), taken apart once and multiplied with all XROWS rows of x.
// SmolLM2's 3072x576 Q4_1 weight on lavapipe, one row: 1.38 -> 0.29-0.54 ms against
// lib/linear_gemv (docs/PERF.md).
// Needs from the kernel: x (array<XElem>), w, store_pair (and step, with lib/rows_of_step);
// w_block32 from lib/weight64_* (with lib/words64), lib/weight_affine_block32 or
// lib/weight_block32 (with the type's piece), or the type's piece (Q6_K); NORMED,
// gemv_gamma4, gemv_scale from lib/gemv_input_*; step_rows from lib/rows_one (XROWS = 1) or
// lib/rows_of_step; f32x4_of from lib/u64_bits; w_elem from lib/weight_rows (the
// weight grouped by rows: each workgroup's blocks one sequential stream). The adapter has
// SHADER_INT64.
// Constants: K (a multiple of 32), N, RPG (2 or 4), XROWS (1, 2 or 4), WG_THREADS (8: the
// subgroup size, so lane j's vec4 is values 4j .. 4j + 3 of the block).
alias XElem = vec2<u64>;

const WG_ROWS: u32 = WG_THREADS * RPG;
const MAX_XROWS: u32 = 4u;

fn x_vec4(e: XElem) -> vec4<f32> {
    return f32x4_of(e);
}

// Values 8i .. 8i + 7 of the 32-value block of x whose values 4j .. 4j + 3 lane j holds (xv), in
// every lane. A shuffle, not subgroupBroadcast: inside a loop llvmpipe finds the first active
// lane for every broadcast, a shuffle with a constant lane is one permute.
fn x8_of_lanes(xv: vec4<f32>, i: u32) -> W8 {
    return W8(subgroupShuffle(xv, 2u * i), subgroupShuffle(xv, 2u * i + 1u));
}

// Values 8i .. 8i + 7 of the block's quants (i a constant once the caller's loop unrolls).
fn w32_part(w: W32, i: u32) -> W8 {
    switch i {
        case 0u: {
            return w.q0;
        }
        case 1u: {
            return w.q1;
        }
        case 2u: {
            return w.q2;
        }
        default: {
            return w.q3;
        }
    }
}

// Row m of x times this lane's weight blocks at k (wb): the dot products (component r for
// weight row r) and the x^2 sum of this lane's four values of the row.
struct RowBlock {
    dots: vec4<f32>,
    ss: f32,
}

// g: gamma at this lane's four values of the block. The block of x is taken eight values at a
// time, each eight multiplied into every weight row before the next is shuffled in: the whole
// block in every lane (32 SIMD registers on llvmpipe) beside the weight blocks spilled to the
// stack (with gamma in u64 pairs: SmolLM2's 8-row steps 11-12% faster on lavapipe, docs/PERF.md).
fn row_block(m: u32, k: u32, lane: u32, wb: array<W32, RPG>, g: vec4<f32>) -> RowBlock {
    let xl = x_vec4(x[(m * K + k) / 4u + lane]);
    let xg = xl * g;
    // q: each weight row's sum of quants times x; s: x's values, for the blocks' offsets (W32.m).
    var q = vec4<f32>(0.0);
    var s = vec4<f32>(0.0);
    for (var i = 0u; i < 4u; i++) {
        let xi = x8_of_lanes(xg, i);
        for (var r = 0u; r < RPG; r++) {
            q[r] += dot8(w32_part(wb[r], i), xi);
        }
        s = s + xi.lo + xi.hi;
    }
    let sum = dot(s, vec4<f32>(1.0));
    var dots = vec4<f32>(0.0);
    for (var r = 0u; r < RPG; r++) {
        dots[r] = wb[r].d * q[r] + wb[r].m * sum;
    }
    return RowBlock(dots, dot(xl, xl));
}

// Adds a row's block into its sums.
fn add_block(a: RowBlock, b: RowBlock) -> RowBlock {
    return RowBlock(a.dots + b.dots, a.ss + b.ss);
}

@compute @workgroup_size(WG_THREADS)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) groups: vec3<u32>,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    // Large outputs (an LM head) need more than 65535 workgroups: the weight's rows span x and
    // y of the grid, x's rows z.
    let group = wg.y * groups.x + wg.x;
    let n0 = group * WG_ROWS + lane * RPG;
    let m0 = wg.z * XROWS;
    let rows = step_rows();
    // Rows past the step's repeat its last (valid memory), never stored.
    var m: array<u32, MAX_XROWS>;
    for (var t = 0u; t < MAX_XROWS; t++) {
        m[t] = min(m0 + t, max(rows, 1u) - 1u);
    }
    var acc: array<RowBlock, MAX_XROWS>;
    for (var c = 0u; c < K / 32u; c++) {
        let k = c * 32u;
        var wb: array<W32, RPG>;
        for (var r = 0u; r < RPG; r++) {
            // Rows past N read row N - 1 (valid memory); their sums are never stored.
            wb[r] = w_block32(w_elem(min(n0 + r, N - 1u), k));
        }
        // gamma for this lane's values of the block: loaded once for all XROWS rows (llvmpipe
        // does not merge the same load made per row: at 8 rows it was over half of all loads).
        let g = gemv_gamma4(k + 4u * lane);
        // The rows written out rather than looped over: NIR unrolls no loop this long, and
        // then acc would be indexed by a variable, each access a per-lane loop.
        acc[0] = add_block(acc[0], row_block(m[0], k, lane, wb, g));
        if (XROWS >= 2u) {
            acc[1] = add_block(acc[1], row_block(m[1], k, lane, wb, g));
        }
        if (XROWS >= 4u) {
            acc[2] = add_block(acc[2], row_block(m[2], k, lane, wb, g));
            acc[3] = add_block(acc[3], row_block(m[3], k, lane, wb, g));
        }
    }
    for (var t = 0u; t < XROWS; t++) {
        if (NORMED) {
            var s = acc[t].ss;
            s += subgroupShuffleXor(s, 1u);
            s += subgroupShuffleXor(s, 2u);
            s += subgroupShuffleXor(s, 4u);
            acc[t].dots *= gemv_scale(s);
        }
        if (m0 + t < rows) {
            for (var r = 0u; r < RPG; r += 2u) {
                if (n0 + r < N) {
                    store_pair(m0 + t, n0 + r, acc[t].dots[r], acc[t].dots[r + 1u]);
                }
            }
        }
    }
}
