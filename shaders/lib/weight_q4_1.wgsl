// Weight storage: ggml Q4_1 blocks of 32 values, 5 words each: [d | m] (f16s) then 16 bytes
// (nibbles as Q4_0). value = d * q + m (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return unpack2x16float(w[(e / 32u) * 5u]);
}

fn w_quants(e: u32) -> vec4<f32> {
    let j = e % 32u;
    return nibbles4(w[(e / 32u) * 5u + 1u + (j % 16u) / 4u], select(0u, 4u, j >= 16u));
}
