// RoPE of one rotation pair (v.x, v.y) of frequency i at position pos: the pair is rotated by
// pos * inv_freq[i]. The kernel declares `inv_freq` (head_dim / 2 frequencies).
fn rope(v: vec2<f32>, pos: u32, i: u32) -> vec2<f32> {
    let sc = sin_cos(f32(pos) * inv_freq[i]);
    return vec2<f32>(v.x * sc.y - v.y * sc.x, v.y * sc.y + v.x * sc.x);
}

// (sin x, cos x) to about an ulp for 0 <= x < 1e5 (positions times frequencies up to 1), as
// transformers computes them from the same f32 angle. WGSL's sin and cos promise 2^-11 only
// inside [-pi, pi], and some adapters (SwiftShader, a browser's software WebGPU) are that coarse
// for the large angles of late positions: logits 50x further from transformers' than lavapipe's.
// x is reduced by multiples of pi/2 split in three (the first two exact for these multiples),
// then Cephes' sinf/cosf polynomials on [-pi/4, pi/4].
fn sin_cos(x: f32) -> vec2<f32> {
    let j = round(x * 0.63661977236758134);
    let r = ((x - j * 1.5703125) - j * 4.8375129699707031e-4) - j * 7.5497899548918821e-8;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    switch i32(j) & 3 {
        case 0: { return vec2<f32>(s, c); }
        case 1: { return vec2<f32>(c, -s); }
        case 2: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}
