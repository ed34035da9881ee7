// w_block32 for weight types without their own: the block at e (e % 32 == 0) as four w_load8s,
// values as they are (d = 1, m = 0), for lib/linear_gemv_rows.
fn w_block32(e: u32) -> W32 {
    return W32(w_load8(e), w_load8(e + 8u), w_load8(e + 16u), w_load8(e + 24u), 1.0, 0.0);
}
