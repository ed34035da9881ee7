// Q4_1 (lib/weight_q4_1's layout) for the rows core, through lib/words64: the block at e
// (e % 32 == 0), its five words in three loads.
fn w_block32(e: u32) -> W32 {
    let v = block_words((e / 32u) * 5u, 3u);
    let dm = unpack2x16float(v.w0);
    return nibbles_block(v.w1, v.w2, v.w3, v.w4, dm.x, dm.y);
}
