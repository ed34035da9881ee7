// Weight storage: ggml IQ4_NL blocks of 32 values, 18 bytes as stored (lib/weight_bytes): d
// (f16), then 16 bytes of nibbles as Q4_0. value = d * table[q] (lib/weight_iq4_values,
// lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return vec2<f32>(w_f16_at((e / 32u) * 18u), 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    let j = e % 32u;
    return iq4_values(w_word_at((e / 32u) * 18u + 2u + j % 16u) >> select(0u, 4u, j >= 16u));
}
