// Weight storage: ggml Q5_0 blocks of 32 values, 22 bytes as stored (lib/weight_bytes): d (f16),
// qh (4 bytes), then 16 bytes of low nibbles (lib/weight_q5_bits). value = d * (q - 16)
// (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let d = w_f16_at((e / 32u) * 22u);
    return vec2<f32>(d, -16.0 * d);
}

fn w_quants(e: u32) -> vec4<f32> {
    let o = (e / 32u) * 22u;
    let j = e % 32u;
    return q5_quants(w_word_at(o + 2u), w_word_at(o + 6u + j % 16u), j);
}
