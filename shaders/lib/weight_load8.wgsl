// Eight consecutive weight elements (e % 8 == 0) as two loads of four, for storage types whose
// natural load is four values (f32 vec4s, the words of a quantized block).
fn w_load8(e: u32) -> W8 {
    return W8(w_load4(e), w_load4(e + 4u));
}
