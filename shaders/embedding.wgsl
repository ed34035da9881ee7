// Embedding gather: x[t] = table[ids[t]] * SCALE for all tokens of the step (SCALE: Gemma's
// sqrt(hidden), else 1); the grid's y is the token, its x the row's vec4s, WG_THREADS a
// workgroup (a 1-D grid of every token's vec4s passed 65535 workgroups at 12,484 rows of
// Gemma 3 27B). A table split into row ranges (binding limits) is gathered by one dispatch per
// part: ids outside [ROW_LO, ROW_HI) are skipped.
// Rows are read through lib/weight_rows' w_elem: the table is stored as the weight matrices are
// (grouped by rows on CPU adapters; where tied, it is the LM head).
// Constants: K (the row width), ROW_LO, ROW_HI, WG_THREADS, SCALE; N (ROW_HI - ROW_LO) and
// W_GROUP_ROWS for lib/weight_rows.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read> w: array<WElem>;
@group(0) @binding(3) var<storage, read_write> x: array<vec4<f32>>;

@compute @workgroup_size(WG_THREADS)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let t = gid.y;
    let e = gid.x;
    if (t >= step.n_tokens || e >= K / 4u) {
        return;
    }
    let id = ids[t];
    if (id >= ROW_LO && id < ROW_HI) {
        x[t * (K / 4u) + e] = w_load4(w_elem(id - ROW_LO, e * 4u)) * SCALE;
    }
}
