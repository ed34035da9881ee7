// Q8_0 (lib/weight_q8_0's layout: 34-byte blocks) for the rows core, through lib/words64: the
// block at e (e % 32 == 0), the nine words it spans in five loads.
fn w_block32(e: u32) -> W32 {
    let byte = (e / 32u) * 34u;
    let v = block_words(byte / 4u, 5u);
    let odd = (byte & 2u) != 0u;
    return W32(
        W8(i8x4(block_word(v.w0, v.w1, odd)), i8x4(block_word(v.w1, v.w2, odd))),
        W8(i8x4(block_word(v.w2, v.w3, odd)), i8x4(block_word(v.w3, v.w4, odd))),
        W8(i8x4(block_word(v.w4, v.w5, odd)), i8x4(block_word(v.w5, v.w6, odd))),
        W8(i8x4(block_word(v.w6, v.w7, odd)), i8x4(block_word(v.w7, v.w8, odd))),
        block_scale(v.w0, odd),
        0.0,
    );
}
