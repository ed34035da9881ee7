// Reads inside blocks whose size is not a multiple of 4 bytes (Q8_0: 34, Q4_0 and IQ4_NL: 18,
// Q5_0: 22), kept on the GPU as the file stores them, unpadded, so a quantized model takes its
// file's size. Every field of these blocks starts at an even byte, so a word at an even byte
// offset is one word or the two halves of two.
fn w_word_at(byte: u32) -> u32 {
    let i = byte / 4u;
    let lo = w[i];
    // The next word is read either way (no branch); past the buffer's end (an aligned read of
    // its last word) the kernels' bounds checks keep the read inside, and it is not used.
    let hi = w[i + 1u];
    return select(lo, (lo >> 16u) | (hi << 16u), (byte & 2u) != 0u);
}

// The f16 at an even byte offset.
fn w_f16_at(byte: u32) -> f32 {
    return unpack2x16float(w[byte / 4u] >> ((byte & 2u) * 8u)).x;
}

// For a block that starts with an f16 scale at an even byte (Q4_0, Q8_0), read as whole words
// w0, w1, ... from its first byte's word (`odd`: it starts at that word's second half): the
// scale, and the word of bytes 2 + 4t .. 5 + 4t of the block from words t and t + 1 (whole in
// the second when the block starts at a half word, else straddling both).
fn block_scale(w0: u32, odd: bool) -> f32 {
    return unpack2x16float(select(w0, w0 >> 16u, odd)).x;
}

fn block_word(a: u32, b: u32, odd: bool) -> u32 {
    return select((a >> 16u) | (b << 16u), b, odd);
}
