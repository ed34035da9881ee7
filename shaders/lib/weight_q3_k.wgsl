// Weight storage: ggml Q3_K super-blocks of 256 values, 28 words each: hmask (32 bytes: bit s of
// byte l = third bit of value 32s + l), qs (64 bytes: value 128h + 32s + l at bits 2s of byte
// 32h + l), 16 6-bit scales in 12 bytes (sub-block s of 16: low nibble at byte s % 8, nibble
// s / 8; high 2 bits at byte 8 + s % 4, bits 2 (s / 4)), [d (f16) | pad].
// value = d * (scale - 32) * (q - 4) (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    let b = (e / 256u) * 28u;
    let s = (e % 256u) / 16u;
    let lo = (w[b + 24u + (s % 8u) / 4u] >> (8u * (s % 4u) + 4u * (s / 8u))) & 15u;
    let hi = (w[b + 26u] >> (8u * (s % 4u) + 2u * (s / 4u))) & 3u;
    return vec2<f32>(unpack2x16float(w[b + 27u]).x * f32(i32(lo | (hi << 4u)) - 32), 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 28u;
    let j = e % 256u;
    let l = j % 32u;
    // Four values' bits side by side: byte i of q is value j + i.
    let lo = w[b + 8u + (j / 128u) * 8u + l / 4u] >> (2u * ((j % 128u) / 32u));
    let hi = w[b + l / 4u] >> (j / 32u);
    let q = (lo & 0x03030303u) | ((hi & 0x01010101u) << 2u);
    return vec4<f32>(vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(255u)) - 4.0;
}
