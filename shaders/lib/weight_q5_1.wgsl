// Weight storage: ggml Q5_1 blocks of 32 values, 6 words each: [d | m] (f16s), qh, then 16 bytes
// of low nibbles (lib/weight_q5_bits). value = d * q + m (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return unpack2x16float(w[(e / 32u) * 6u]);
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 32u) * 6u;
    let j = e % 32u;
    return q5_quants(w[b + 1u], w[b + 2u + (j % 16u) / 4u], j);
}
