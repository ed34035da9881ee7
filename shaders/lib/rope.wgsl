// RoPE of one rotation pair (v.x, v.y) of frequency i at position pos: the pair is rotated by
// pos * inv_freq[i]. The kernel declares `inv_freq` (head_dim / 2 frequencies).
fn rope(v: vec2<f32>, pos: u32, i: u32) -> vec2<f32> {
    let theta = f32(pos) * inv_freq[i];
    let c = cos(theta);
    let s = sin(theta);
    return vec2<f32>(v.x * c - v.y * s, v.y * c + v.x * s);
}
