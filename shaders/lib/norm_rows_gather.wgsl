// rmsnorm over the step's output rows: y row i from x row out_row(i) (lib/plan).
@group(0) @binding(3) var<storage, read> plan: array<u32>;

fn norm_row(i: u32) -> u32 {
    return out_row(i);
}
