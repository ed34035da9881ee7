// Sampling on the GPU, so decode reads back one id per row instead of the vocabulary, in
// transformers' order (its logits warpers): temperature, then top-k (every token at least as
// large as the k-th largest), then top-p over the softmax of what top-k kept (the fewest
// largest tokens whose renormalized mass reaches top_p). Both cut-offs are found by bisection
// on the logit value, then the Gumbel-max trick (argmax of logit / T + Gumbel noise draws from
// softmax(logit / T)) with a counter-based random number per (seed, step, token): the same
// seed gives the same output. A row with temperature 0 takes its argmax (lowest index on
// ties), so one dispatch serves a step whose rows mix greedy and sampled sequences; so does a
// row with an infinite logit (the first such token: it takes all the probability, as on the
// host). NaN, -inf and logits at or below LOWEST_LOGIT are never chosen (crate::sampling's rule).
// One workgroup per row of logits, each row with its own parameters: three passes over the
// vocabulary (range, histogram, compaction), then the bisections over the few candidates.
// Constants: V, WG_THREADS (>= 256), CAND_MAX (what this adapter's workgroup memory holds);
// reductions from lib/reduce and lib/argmax_reduce; every logit read through lib/logit_value.
struct Params {
    temperature: f32,
    top_p: f32,
    top_k: u32, // 0 = no limit
    seed_lo: u32,
    seed_hi: u32,
    counter: u32, // the step: a fresh draw per token
    pad0: u32,
    pad1: u32,
}

@group(0) @binding(0) var<storage, read> row_params: array<Params>;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const BISECTION_STEPS: u32 = 32u;

fn hash(x: u32) -> u32 {
    let s = x * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

var<private> row_base: u32; // where this row's logits start
// The row's largest logit, for a uniform read of it (the cut-offs' barriers depend on it).
var<workgroup> row_max: f32;

// Logit i of this row, as comparisons can use it (lib/logit_value).
fn logit(i: u32) -> f32 {
    return logit_value(logits[row_base + i]);
}

// Uniform in (0, 1) for token i of the step `p.counter` of a generation seeded `p.seed_*`.
fn uniform01(p: Params, i: u32) -> f32 {
    let h = hash(hash(i ^ p.seed_lo) ^ hash(p.counter ^ p.seed_hi));
    return (f32(h >> 8u) + 0.5) / 16777216.0;
}

// The tokens the cut-offs are searched over: either a compacted list of candidates in
// workgroup memory (every token that can survive the cut-offs, see main) or the whole
// vocabulary when the list would not fit. Same decisions either way: below the candidates'
// floor both counts (masses) already reach the target.
const BUCKETS: u32 = 256u;
var<workgroup> hist_count: array<atomic<u32>, BUCKETS>;
var<workgroup> hist_mass: array<atomic<u32>, BUCKETS>;
var<workgroup> cand_n: atomic<u32>;
var<workgroup> cand_v: array<f32, CAND_MAX>;
var<workgroup> cand_i: array<u32, CAND_MAX>;
var<workgroup> floor_bucket: u32;
var<workgroup> floor_count: u32;
var<private> use_cands: bool;
var<private> n_src: u32;

fn src_value(j: u32) -> f32 {
    if (use_cands) {
        return cand_v[j];
    }
    return logit(j);
}

fn src_index(j: u32) -> u32 {
    if (use_cands) {
        return cand_i[j];
    }
    return j;
}

fn count_at_least(lid: u32, t: f32) -> f32 {
    var c = 0.0;
    for (var j = lid; j < n_src; j += WG_THREADS) {
        c += select(0.0, 1.0, src_value(j) >= t);
    }
    return wg_sum(lid, c);
}

// Unnormalized probability mass of the tokens >= t.
fn mass_at_least(lid: u32, t: f32, mx: f32, inv_t: f32) -> f32 {
    var s = 0.0;
    for (var j = lid; j < n_src; j += WG_THREADS) {
        let l = src_value(j);
        s += select(0.0, exp((l - mx) * inv_t), l >= t);
    }
    return wg_sum(lid, s);
}

fn bucket(l: f32, mn: f32, mx: f32) -> u32 {
    return min(u32(max((l - mn) / max(mx - mn, 1e-30), 0.0) * f32(BUCKETS)), BUCKETS - 1u);
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wg: vec3<u32>) {
    let params = row_params[wg.x];
    row_base = wg.x * V;
    // The range of the logits that can be chosen: below mn none is (the cut-offs start there).
    var mx = LOWEST_LOGIT;
    var mn = 3.0e38;
    for (var i = lid; i < V; i += WG_THREADS) {
        let l = logit(i);
        mx = max(mx, l);
        mn = select(mn, min(mn, l), l > LOWEST_LOGIT);
    }
    mx = wg_max(lid, mx);
    mn = -wg_max(lid, -mn);
    if (lid == 0u) {
        row_max = mx;
    }
    // A row with an infinite logit (read as F32_MAX) takes the first of them, as greedy rows
    // take their argmax.
    let greedy = params.temperature <= 0.0 || workgroupUniformLoad(&row_max) == F32_MAX;
    let inv_t = select(1.0 / params.temperature, 1.0, greedy);
    let top_k = !greedy && params.top_k > 0u && params.top_k < V;
    let top_p = !greedy && params.top_p < 1.0;
    // One pass: a histogram of counts and (fixed-point, rounded down) masses over 256 value
    // buckets, and the exact total mass. No token below the bucket under the one where the
    // top k (without top-k: the top_p mass) is reached can survive the cut-offs, so only the
    // tokens from that bucket up are candidates; they are compacted once.
    // Neither cut-off: no histogram, every token takes part in the draw.
    atomicStore(&hist_count[lid % BUCKETS], 0u);
    atomicStore(&hist_mass[lid % BUCKETS], 0u);
    atomicStore(&cand_n, 0u);
    workgroupBarrier();
    var total = 0.0;
    for (var i = lid; i < select(0u, V, top_k || top_p); i += WG_THREADS) {
        let l = logit(i);
        let m = exp((l - mx) * inv_t);
        total += m;
        let b = bucket(l, mn, mx);
        atomicAdd(&hist_count[b], 1u);
        atomicAdd(&hist_mass[b], u32(m * 4096.0));
    }
    total = wg_sum(lid, total);
    if (lid == 0u) {
        var floor_k = 0u;
        var floor_p = 0u;
        var count = 0u;
        var mass = 0.0;
        for (var b = i32(BUCKETS) - 1; b >= 0; b--) {
            let prev_count = count;
            let prev_mass = mass;
            count += atomicLoad(&hist_count[b]);
            mass += f32(atomicLoad(&hist_mass[b])) / 4096.0;
            if (top_k && prev_count < params.top_k && count >= params.top_k) {
                floor_k = u32(max(b - 1, 0));
            }
            if (top_p && prev_mass < params.top_p * total && mass >= params.top_p * total) {
                floor_p = u32(max(b - 1, 0));
            }
        }
        // top-p is taken over what top-k keeps, so with top-k every one of its tokens must be
        // a candidate.
        floor_bucket = select(floor_p, floor_k, top_k);
        var above = 0u;
        for (var b = floor_bucket; b < BUCKETS; b++) {
            above += atomicLoad(&hist_count[b]);
        }
        floor_count = above;
    }
    let fb = workgroupUniformLoad(&floor_bucket);
    // Compact only when the candidates fit (the histogram already counted them).
    use_cands = (top_k || top_p) && workgroupUniformLoad(&floor_count) <= CAND_MAX;
    for (var i = lid; i < select(0u, V, use_cands); i += WG_THREADS) {
        let l = logit(i);
        if (bucket(l, mn, mx) >= fb) {
            let at = atomicAdd(&cand_n, 1u);
            cand_v[at] = l;
            cand_i[at] = i;
        }
    }
    n_src = select(V, workgroupUniformLoad(&cand_n), use_cands);
    // top-k: the largest cut-off that keeps at least k tokens.
    var cut_k = mn;
    if (top_k) {
        var lo = mn;
        var hi = mx;
        for (var it = 0u; it < BISECTION_STEPS; it++) {
            let mid = 0.5 * (lo + hi);
            if (count_at_least(lid, mid) >= f32(params.top_k)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        cut_k = lo;
    }
    // top-p over what top-k kept, renormalized: the largest cut-off whose tokens still hold at
    // least top_p of the mass above cut_k (the whole vocabulary's without top-k).
    var cut = cut_k;
    if (top_p) {
        var kept = total;
        if (top_k) {
            kept = mass_at_least(lid, cut_k, mx, inv_t);
        }
        let want = params.top_p * kept;
        var lo = cut_k;
        var hi = mx;
        for (var it = 0u; it < BISECTION_STEPS; it++) {
            let mid = 0.5 * (lo + hi);
            if (mass_at_least(lid, mid, mx, inv_t) >= want) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        cut = lo;
    }
    var bg = -3.0e38;
    var bi = 0xffffffffu;
    for (var j = lid; j < n_src; j += WG_THREADS) {
        let l = src_value(j);
        let i = src_index(j);
        let g = (l - mx) * inv_t - select(log(-log(uniform01(params, i))), 0.0, greedy);
        if (l >= cut && (g > bg || (g == bg && i < bi))) {
            bg = g;
            bi = i;
        }
    }
    let best = wg_argmax(lid, bg, bi);
    if (lid == 0u) {
        out[wg.x] = best;
    }
}
