// A weight read as 64-bit words: how the rows core (lib/linear_gemv_rows) reads the blocks of the
// types it has a w_block32 for (lib/weight64_*), on adapters with SHADER_INT64. llvmpipe loads
// storage per lane and per component, each load a dozen instructions whatever its width, so a
// u64 brings the bytes of two u32 loads for the cost of one (lavapipe, a pure-load probe: 27%
// less time; docs/PERF.md).
// Needs lo32, hi32 from lib/u64_bits.
alias WElem = u64;

// Two consecutive u32 words of the stream a, b, ... of u64s, from its first word, or (skip) its
// second.
fn word_pair(a: u64, b: u64, skip: bool) -> vec2<u32> {
    return select(vec2<u32>(lo32(a), hi32(a)), vec2<u32>(hi32(a), lo32(b)), skip);
}

// Up to nine consecutive u32 words of the weight (a block of Q4_0, Q4_1 or Q8_0 and the word
// after a block that starts at a half word).
struct Words {
    w0: u32,
    w1: u32,
    w2: u32,
    w3: u32,
    w4: u32,
    w5: u32,
    w6: u32,
    w7: u32,
    w8: u32,
}

// Words i .. i + 2n - 2 of the weight, from n u64 loads (n <= 5, a constant: the loops unroll):
// a Q4_0 or Q4_1 block takes three, Q8_0's five. The words past those are not the weight's.
fn block_words(i: u32, n: u32) -> Words {
    let j = i / 2u;
    let skip = (i & 1u) != 0u;
    var u: array<u64, 6>;
    for (var t = 0u; t < n; t++) {
        u[t] = w[j + t];
    }
    var v: array<u32, 10>;
    for (var t = 0u; t < 5u; t++) {
        let p = word_pair(u[t], u[t + 1u], skip);
        v[2u * t] = p.x;
        v[2u * t + 1u] = p.y;
    }
    return Words(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8]);
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
