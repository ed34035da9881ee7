// Q4_K / Q5_K: the 6-bit scale and min of sub-block s (ggml's get_scale_min_k4) from the 12 scale
// bytes in words b + 1 .. b + 3 of the super-block at word b. Bytes 0-3 hold the scales of
// sub-blocks 0-3 (top 2 bits: those of 4-7's), bytes 4-7 the mins likewise, bytes 8-11 the low
// 4 bits of 4-7's scales (low nibbles) and mins (high nibbles).
fn k4_scale_min(b: u32, s: u32) -> vec2<f32> {
    let shift = 8u * (s % 4u);
    let sc = (w[b + 1u] >> shift) & 255u;
    let mn = (w[b + 2u] >> shift) & 255u;
    if (s < 4u) {
        return vec2<f32>(f32(sc & 63u), f32(mn & 63u));
    }
    let lo = w[b + 3u] >> shift;
    return vec2<f32>(f32((lo & 15u) | ((sc >> 6u) << 4u)), f32(((lo >> 4u) & 15u) | ((mn >> 6u) << 4u)));
}
