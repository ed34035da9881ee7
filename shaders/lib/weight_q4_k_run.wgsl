// A one-row GEMV lane's run of Q4_K values (lib/linear_gemv): 64 values e .. e + 63 (e % 64 ==
// 0), sub-blocks 2c and 2c + 1 of a super-block, which share one 32-byte chunk of quants (low
// and high nibbles). The chunk's 8 words and both sub-blocks' scales and mins (w_scale) are
// read once for the run, where eight-value loads (lib/weight_affine) read each quant word twice
// and the scale words for every eight values. Each value is scale * q + offset as there.
const W_RUN: u32 = 64u;

struct WRun {
    // The chunk's words 0-3 and 4-7.
    q0: vec4<u32>,
    q1: vec4<u32>,
    // (scale, offset) of the low-nibble and the high-nibble sub-block (lib/weight_q4_k's w_scale).
    lo: vec2<f32>,
    hi: vec2<f32>,
}

fn w_run(e: u32) -> WRun {
    let at = (e / 256u) * 36u + 4u + ((e % 256u) / 64u) * 8u;
    return WRun(
        vec4<u32>(w[at], w[at + 1u], w[at + 2u], w[at + 3u]),
        vec4<u32>(w[at + 4u], w[at + 5u], w[at + 6u], w[at + 7u]),
        w_scale(e),
        w_scale(e + 32u),
    );
}

// Values 8p .. 8p + 7 of the run: bytes 8(p % 4) .. of the chunk, their low nibbles for p < 4,
// high ones after.
fn w_run8(r: WRun, p: u32) -> W8 {
    let q = select(r.q0, r.q1, p % 4u >= 2u);
    let pair = select(q.xy, q.zw, p % 2u == 1u);
    let shift = select(0u, 4u, p >= 4u);
    let s = select(r.lo, r.hi, p >= 4u);
    return W8(s.x * nibbles4(pair.x, shift) + s.y, s.x * nibbles4(pair.y, shift) + s.y);
}
