// Which positions a row of the step attends to (lib/plan's functions, WINDOW).
// The oldest position a row at pos attends to: the oldest its sequence holds (kv_lo), and with a
// WINDOW (a local layer's sliding window, 0 for none) the last WINDOW positions only.
fn attend_lo(kv_lo: u32, pos: u32) -> u32 {
    if (WINDOW > 0u && pos + 1u > WINDOW) {
        return max(kv_lo, pos + 1u - WINDOW);
    }
    return kv_lo;
}

// What row t of the step attends to: its sequence's block table, the oldest position it sees
// and how many (lo ..= its own position).
struct RowSpan {
    table: SeqTable,
    lo: u32,
    n: u32,
}

fn row_span(t: u32) -> RowSpan {
    let pos = row_pos(t);
    let seq = row_seq(t);
    let lo = attend_lo(seq_kv_lo(seq), pos);
    return RowSpan(seq_table(seq), lo, pos + 1u - lo);
}
