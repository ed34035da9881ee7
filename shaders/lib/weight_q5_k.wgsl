// Weight storage: ggml Q5_K super-blocks of 256 values, 44 words each: [d | dmin] (f16s), 12
// bytes of scales and mins as Q4_K (lib/weight_k4_scales), qh (32 bytes: bit s of byte l = fifth
// bit of value 32s + l), then 128 bytes of low nibbles as Q4_K.
// value = d * scale * q - dmin * min (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let b = (e / 256u) * 44u;
    let dm = unpack2x16float(w[b]);
    let sm = k4_scale_min(b, (e % 256u) / 32u);
    return vec2<f32>(dm.x * sm.x, -(dm.y * sm.y));
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 44u;
    let j = e % 256u;
    let s = j / 32u;
    let l = j % 32u;
    // Four values' bits side by side: byte i of q is value j + i.
    let lo = w[b + 12u + (s / 2u) * 8u + l / 4u] >> (4u * (s % 2u));
    let hi = w[b + 4u + l / 4u] >> s;
    let q = (lo & 0x0f0f0f0fu) | ((hi & 0x01010101u) << 4u);
    return vec4<f32>(vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(255u));
}
