// w_load4 / w_load8 for block types whose values are scale * quant + offset with one (scale,
// offset) per aligned group of at least 8 values: the type's piece defines `w_scale(e)` (the
// group of element e) and `w_quants(e)` (quants e .. e + 3, e % 4 == 0), so an 8-value load reads
// the scale words once.
fn w_load4(e: u32) -> vec4<f32> {
    let s = w_scale(e);
    return s.x * w_quants(e) + s.y;
}

fn w_load8(e: u32) -> W8 {
    let s = w_scale(e);
    return W8(s.x * w_quants(e) + s.y, s.x * w_quants(e + 4u) + s.y);
}
