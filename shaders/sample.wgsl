// Sampling on the GPU, so decode reads back one id instead of the vocabulary: temperature,
// top-k and top-p cut-offs found by bisection on the logit value, then the Gumbel-max trick
// (argmax of logit / T + Gumbel noise draws from softmax(logit / T)) with a counter-based
// random number per (seed, step, token): the same seed gives the same output.
// One workgroup. Constants: V, WG_THREADS; reductions from lib/reduce and lib/argmax_reduce.
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

@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<u32>;

const BISECTION_STEPS: u32 = 32u;

fn hash(x: u32) -> u32 {
    let s = x * 747796405u + 2891336453u;
    let w = ((s >> ((s >> 28u) + 4u)) ^ s) * 277803737u;
    return (w >> 22u) ^ w;
}

// Uniform in (0, 1) for token i of this step.
fn uniform01(i: u32) -> f32 {
    let h = hash(hash(i ^ params.seed_lo) ^ hash(params.counter ^ params.seed_hi));
    return (f32(h >> 8u) + 0.5) / 16777216.0;
}

fn count_at_least(lid: u32, t: f32) -> f32 {
    var c = 0.0;
    for (var i = lid; i < V; i += WG_THREADS) {
        c += select(0.0, 1.0, logits[i] >= t);
    }
    return wg_sum(lid, c);
}

// Unnormalized probability mass of the logits >= t.
fn mass_at_least(lid: u32, t: f32, mx: f32, inv_t: f32) -> f32 {
    var s = 0.0;
    for (var i = lid; i < V; i += WG_THREADS) {
        let l = logits[i];
        s += select(0.0, exp((l - mx) * inv_t), l >= t);
    }
    return wg_sum(lid, s);
}

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(local_invocation_index) lid: u32) {
    var mx = -3.0e38;
    var mn = 3.0e38;
    for (var i = lid; i < V; i += WG_THREADS) {
        mx = max(mx, logits[i]);
        mn = min(mn, logits[i]);
    }
    mx = wg_max(lid, mx);
    mn = -wg_max(lid, -mn);
    let inv_t = 1.0 / params.temperature;
    // top-k: the largest cut-off that keeps at least k tokens.
    var cut_k = mn;
    if (params.top_k > 0u && params.top_k < V) {
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
    // top-p: the largest cut-off whose tokens still hold at least top_p of the mass.
    var cut_p = mn;
    if (params.top_p < 1.0) {
        let want = params.top_p * mass_at_least(lid, mn, mx, inv_t);
        var lo = mn;
        var hi = mx;
        for (var it = 0u; it < BISECTION_STEPS; it++) {
            let mid = 0.5 * (lo + hi);
            if (mass_at_least(lid, mid, mx, inv_t) >= want) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        cut_p = lo;
    }
    let cut = max(cut_k, cut_p);
    var bg = -3.0e38;
    var bi = 0xffffffffu;
    for (var i = lid; i < V; i += WG_THREADS) {
        let l = logits[i];
        let g = (l - mx) * inv_t - log(-log(uniform01(i)));
        if (l >= cut && g > bg) {
            bg = g;
            bi = i;
        }
    }
    let best = wg_argmax(lid, bg, bi);
    if (lid == 0u) {
        out[0] = best;
    }
}
