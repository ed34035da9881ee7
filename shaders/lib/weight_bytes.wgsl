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
