// Weight storage: ggml IQ4_XS super-blocks of 256 values, 34 words each: [d (f16) | scales_h]
// (bits 2s: high 2 bits of sub-block s's 6-bit scale), scales_l (bits 4s: its low 4 bits), then
// per sub-block of 32 16 bytes of nibbles as IQ4_NL. value = d * (scale - 32) * table[q]
// (lib/weight_iq4_values, lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let b = (e / 256u) * 34u;
    let s = (e % 256u) / 32u;
    let head = w[b];
    let code = ((w[b + 1u] >> (4u * s)) & 15u) | (((head >> (16u + 2u * s)) & 3u) << 4u);
    return vec2<f32>(unpack2x16float(head).x * f32(i32(code) - 32), 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 34u;
    let j = e % 256u;
    let l = j % 32u;
    return iq4_values(w[b + 2u + (j / 32u) * 4u + (l % 16u) / 4u] >> select(0u, 4u, l >= 16u));
}
