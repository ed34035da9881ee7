// A one-row GEMV lane's run of Q4_K values (lib/linear_gemv): 64 values e .. e + 63 (e % 64 ==
// 0), sub-blocks 2c and 2c + 1 of a super-block, which share one 32-byte chunk of quants (low
// and high nibbles). The chunk's 8 words, d and dmin, and both sub-blocks' scales and mins are
// read once for the run, where eight-value loads (lib/weight_affine) read each quant word twice
// and the scale words for every eight values. Each value is scale * q + offset as there.
const W_RUN: u32 = 64u;

struct WRun {
    // The chunk's words 0-3 and 4-7.
    q0: vec4<u32>,
    q1: vec4<u32>,
    // (scale, offset) of the low-nibble and the high-nibble sub-block.
    lo: vec2<f32>,
    hi: vec2<f32>,
}

fn w_run(e: u32) -> WRun {
    let b = (e / 256u) * 36u;
    let c = (e % 256u) / 64u;
    let at = b + 4u + c * 8u;
    let dm = unpack2x16float(w[b]);
    let sm_lo = k4_scale_min(b, 2u * c);
    let sm_hi = k4_scale_min(b, 2u * c + 1u);
    return WRun(
        vec4<u32>(w[at], w[at + 1u], w[at + 2u], w[at + 3u]),
        vec4<u32>(w[at + 4u], w[at + 5u], w[at + 6u], w[at + 7u]),
        vec2<f32>(dm.x * sm_lo.x, -(dm.y * sm_lo.y)),
        vec2<f32>(dm.x * sm_hi.x, -(dm.y * sm_hi.y)),
    );
}

// Values 8p .. 8p + 7 of the run: bytes 8(p % 4) .. of the chunk, their low nibbles for p < 4,
// high ones after.
fn w_run8(r: WRun, p: u32) -> W8 {
    let q = select(r.q0, r.q1, p % 4u >= 2u);
    let pair = select(q.xy, q.zw, p % 2u == 1u) >> vec2<u32>(select(0u, 4u, p >= 4u));
    let s = select(r.lo, r.hi, p >= 4u);
    let a = vec4<u32>(pair.x, pair.x >> 8u, pair.x >> 16u, pair.x >> 24u) & vec4<u32>(15u);
    let b = vec4<u32>(pair.y, pair.y >> 8u, pair.y >> 16u, pair.y >> 24u) & vec4<u32>(15u);
    return W8(s.x * vec4<f32>(a) + s.y, s.x * vec4<f32>(b) + s.y);
}
