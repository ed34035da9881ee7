// Weight storage: ggml IQ4_NL blocks of 32 values, 5 words each: [d (f16) | pad] then 16 bytes of
// nibbles as Q4_0. value = d * table[q] (lib/weight_iq4_values, lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return vec2<f32>(unpack2x16float(w[(e / 32u) * 5u]).x, 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 5u;
    let j = e % 32u;
    return iq4_values(w[b + 1u + (j % 16u) / 4u] >> select(0u, 4u, j >= 16u));
}
