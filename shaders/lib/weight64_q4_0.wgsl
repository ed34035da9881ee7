// Q4_0 (lib/weight_q4_0's layout: 18-byte blocks) for the rows core, through lib/words64: the
// block at e (e % 32 == 0), the five words it spans in three loads.
fn w_block32(e: u32) -> W32 {
    let byte = (e / 32u) * 18u;
    let v = block_words(byte / 4u, 3u);
    let odd = (byte & 2u) != 0u;
    let d = block_scale(v.w0, odd);
    let q0 = block_word(v.w0, v.w1, odd);
    let q1 = block_word(v.w1, v.w2, odd);
    let q2 = block_word(v.w2, v.w3, odd);
    let q3 = block_word(v.w3, v.w4, odd);
    return nibbles_block(q0, q1, q2, q3, d, -8.0 * d);
}
