// The oldest position a row at pos attends to: the oldest its sequence holds (kv_lo), and with a
// WINDOW (a local layer's sliding window, 0 for none) the last WINDOW positions only.
fn attend_lo(kv_lo: u32, pos: u32) -> u32 {
    if (WINDOW > 0u && pos + 1u > WINDOW) {
        return max(kv_lo, pos + 1u - WINDOW);
    }
    return kv_lo;
}
