// Weight storage: ggml Q8_0 blocks of 32 values, 34 bytes as stored (lib/weight_bytes): d (f16),
// then 32 int8. value = d * q (lib/weight_affine).
alias WElem = u32;

fn w_scale(e: u32) -> vec2<f32> {
    return vec2<f32>(w_f16_at((e / 32u) * 34u), 0.0);
}

fn w_quants(e: u32) -> vec4<f32> {
    return i8x4(w_word_at((e / 32u) * 34u + 2u + e % 32u));
}

// The four int8s of q as values.
fn i8x4(q: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<vec4<i32>>(vec4<u32>(q) << vec4<u32>(24u, 16u, 8u, 0u)) >> vec4<u32>(24u));
}

// The block at e (e % 32 == 0) for lib/linear_gemv_rows: the nine words it spans read once
// (four w_load8s read twenty), taken apart by lib/weight_bytes' block_scale and block_word.
fn w_block32(e: u32) -> W32 {
    let byte = (e / 32u) * 34u;
    let i = byte / 4u;
    let odd = (byte & 2u) != 0u;
    let w0 = w[i];
    let w1 = w[i + 1u];
    let w2 = w[i + 2u];
    let w3 = w[i + 3u];
    let w4 = w[i + 4u];
    let w5 = w[i + 5u];
    let w6 = w[i + 6u];
    let w7 = w[i + 7u];
    let w8 = w[i + 8u];
    return W32(
        W8(i8x4(block_word(w0, w1, odd)), i8x4(block_word(w1, w2, odd))),
        W8(i8x4(block_word(w2, w3, odd)), i8x4(block_word(w3, w4, odd))),
        W8(i8x4(block_word(w4, w5, odd)), i8x4(block_word(w5, w6, odd))),
        W8(i8x4(block_word(w6, w7, odd)), i8x4(block_word(w7, w8, odd))),
        block_scale(w0, odd),
        0.0,
    );
}
