// Weight storage: ggml Q4_0 blocks of 32 values, 18 bytes as stored (lib/weight_bytes): d (f16),
// then 16 bytes; byte j holds value j (low nibble) and value j + 16 (high nibble).
// value = d * (q - 8) (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let d = w_f16_at((e / 32u) * 18u);
    return vec2<f32>(d, -8.0 * d);
}

fn w_quants(e: u32) -> vec4<f32> {
    let j = e % 32u;
    return nibbles4(w_word_at((e / 32u) * 18u + 2u + j % 16u), select(0u, 4u, j >= 16u));
}
