// Weight storage: ggml Q8_0 blocks of 32 values, 34 bytes as stored (lib/weight_bytes): d (f16),
// then 32 int8. value = d * q (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return vec2<f32>(w_f16_at((e / 32u) * 34u), 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    return i8x4(w_word_at((e / 32u) * 34u + 2u + e % 32u));
}
