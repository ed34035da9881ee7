// Weight storage: ggml Q6_K super-blocks of 256 values, 53 words each: ql (128 bytes, low 4
// bits), qh (64 bytes, high 2 bits), 16 int8 scales, [d (f16) | pad]. Each half of 128 values
// has four quarters of 32: quarter qd takes ql bytes +32*(qd&1) (high nibble if qd >= 2),
// qh bits 2*qd, and scale 2*qd (+1 for the second 16). value = d * scale * (q - 32).
alias WElem = u32;

// Four values at e (e % 4 == 0): their quants minus 32, and the scale factor d * scale of their
// group of 16.
struct Q6Four {
    q: vec4<f32>,
    scale: f32,
}

// Four quants minus 32 from a word of low nibbles and a word of high bit pairs, each already
// shifted to its quarter (byte i of each gives value i).
fn q6_quants(lo: u32, hi: u32) -> vec4<f32> {
    let q = (vec4<u32>(lo, lo >> 8u, lo >> 16u, lo >> 24u) & vec4<u32>(15u))
        | ((vec4<u32>(hi, hi >> 8u, hi >> 16u, hi >> 24u) & vec4<u32>(3u)) << vec4<u32>(4u));
    return vec4<f32>(q) - 32.0;
}

// d times int8 scale s of a super-block, from the scale word holding it.
fn q6_scale(word: u32, s: u32, d: f32) -> f32 {
    return d * f32(i32(word << (24u - 8u * (s % 4u))) >> 24u);
}

fn q6_four(e: u32) -> Q6Four {
    let b = (e / 256u) * 53u;
    let j = e % 256u;
    let n = j / 128u;
    let qd = (j % 128u) / 32u;
    let l = j % 32u;
    let lo = w[b + (n * 64u + (qd & 1u) * 32u + l) / 4u] >> select(0u, 4u, qd >= 2u);
    let hi = w[b + 32u + (n * 32u + l) / 4u] >> (2u * qd);
    let s = n * 8u + l / 16u + 2u * qd;
    let d = unpack2x16float(w[b + 52u]).x;
    return Q6Four(q6_quants(lo, hi), q6_scale(w[b + 48u + s / 4u], s, d));
}

fn w_load4(e: u32) -> vec4<f32> {
    let f = q6_four(e);
    return f.scale * f.q;
}

// Eight values share their group's scale (groups of 16 hold whole eights): read once.
fn w_load8(e: u32) -> W8 {
    let lo = q6_four(e);
    let hi = q6_four(e + 4u);
    return W8(lo.scale * lo.q, lo.scale * hi.q);
}

// The rows core's block at e (e % 32 == 0; lib/linear_gemv_rows): one quarter's 32 values as
// values (d = 1, m = 0), their words read once and both scales of 16 from one word.
fn w_block32(e: u32) -> W32 {
    let b = (e / 256u) * 53u;
    let j = e % 256u;
    let n = j / 128u;
    let qd = (j % 128u) / 32u;
    let lo_at = b + (n * 64u + (qd & 1u) * 32u) / 4u;
    let hi_at = b + 32u + n * 8u;
    let lo_shift = select(0u, 4u, qd >= 2u);
    let s = n * 8u + 2u * qd;
    let sw = w[b + 48u + s / 4u];
    let d = unpack2x16float(w[b + 52u]).x;
    let scale0 = q6_scale(sw, s, d);
    let scale1 = q6_scale(sw, s + 1u, d);
    var v: array<vec4<f32>, 8>;
    for (var i = 0u; i < 8u; i++) {
        let q = q6_quants(w[lo_at + i] >> lo_shift, w[hi_at + i] >> (2u * qd));
        v[i] = select(scale1, scale0, i < 4u) * q;
    }
    return W32(W8(v[0], v[1]), W8(v[2], v[3]), W8(v[4], v[5]), W8(v[6], v[7]), 1.0, 0.0);
}
