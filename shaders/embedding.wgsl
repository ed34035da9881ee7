// Embedding gather: x[t] = table[ids[t]] * SCALE for all tokens of the step (SCALE: Gemma's
// sqrt(hidden), else 1); each workgroup copies a batch of WG_THREADS vec4s, which spans several
// ids. A table split into row ranges (binding limits) is gathered by one dispatch per part: ids
// outside [ROW_LO, ROW_HI) are skipped.
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
    let i = gid.x;
    let t = i / (K / 4u);
    if (t >= step.n_tokens) {
        return;
    }
    let id = ids[t];
    if (id >= ROW_LO && id < ROW_HI) {
        x[i] = w_load4(w_elem(id - ROW_LO, (i % (K / 4u)) * 4u)) * SCALE;
    }
}
