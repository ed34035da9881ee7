// Weight storage: ggml Q4_K super-blocks of 256 values, 36 words each: [d | dmin] (f16s),
// 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32, then 128 bytes: chunk c (32 bytes)
// holds sub-block 2c in its low nibbles and 2c + 1 in its high nibbles.
// value = d * scale * q - dmin * min.
alias WElem = u32;

// Byte k of the 12 scale bytes of the block at word b.
fn q4k_scale_byte(b: u32, k: u32) -> u32 {
    return (w[b + 1u + k / 4u] >> (8u * (k % 4u))) & 255u;
}

fn w_load4(e: u32) -> vec4<f32> {
    let b = (e / 256u) * 36u;
    let dm = unpack2x16float(w[b]);
    let j = e % 256u;
    let c = j / 64u;
    let l = j % 64u;
    let sub = 2u * c + l / 32u;
    var sc: u32;
    var mn: u32;
    if (sub < 4u) {
        sc = q4k_scale_byte(b, sub) & 63u;
        mn = q4k_scale_byte(b, sub + 4u) & 63u;
    } else {
        sc = (q4k_scale_byte(b, sub + 4u) & 15u) | ((q4k_scale_byte(b, sub - 4u) >> 6u) << 4u);
        mn = (q4k_scale_byte(b, sub + 4u) >> 4u) | ((q4k_scale_byte(b, sub) >> 6u) << 4u);
    }
    let q = w[b + 4u + c * 8u + (l % 32u) / 4u] >> select(0u, 4u, l >= 32u);
    let v = vec4<u32>(q, q >> 8u, q >> 16u, q >> 24u) & vec4<u32>(15u);
    return dm.x * f32(sc) * vec4<f32>(v) - dm.y * f32(mn);
}
