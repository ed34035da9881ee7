// w_block32 for lib/weight_affine types whose (scale, offset) groups are whole 32-value blocks
// (Q4_K, Q5_K, Q5_0, Q5_1, IQ4_NL, IQ4_XS): the block at e (e % 32 == 0) as its quants with
// one scale and offset (d * q + m), read once, for lib/linear_gemv_rows. Types whose groups are
// 16 values take lib/weight_block32.
fn w_block32(e: u32) -> W32 {
    let s = w_scale(e);
    return W32(
        W8(w_quants(e), w_quants(e + 4u)),
        W8(w_quants(e + 8u), w_quants(e + 12u)),
        W8(w_quants(e + 16u), w_quants(e + 20u)),
        W8(w_quants(e + 24u), w_quants(e + 28u)),
        s.x,
        s.y,
    );
}
