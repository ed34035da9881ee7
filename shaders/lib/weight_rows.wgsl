// Where value k of weight row `row` is stored (an index for w_load4 / w_load8 / w_block32): row
// after row, or with W_GROUP_ROWS > 0 (ops/weight.rs' WeightLayout::Grouped, CPU adapters) in
// groups of W_GROUP_ROWS rows, each group's 32-value blocks column by column, so the rows core's
// lanes read their group as one sequential stream. Constants: K, N (this part's rows),
// W_GROUP_ROWS.
fn w_elem(row: u32, k: u32) -> u32 {
    if (W_GROUP_ROWS == 0u) {
        return row * K + k;
    }
    // max: with W_GROUP_ROWS 0 (returned above) a constant `% 0` would not compile.
    let g0 = row - row % max(W_GROUP_ROWS, 1u);
    let rows = min(W_GROUP_ROWS, N - g0);
    return g0 * K + ((k / 32u) * rows + row - g0) * 32u + k % 32u;
}
