// The step plan: which sequence and position each row of a step is, where each sequence's
// keys and values live, and which rows produce logits. One storage buffer of u32 words, written
// before each submit (src/model/plan.rs); the kernel declares it as `plan`.
// Layout: rows at 0 (sequence, position per row); sequences at SEQS_AT (kv_lo, table offset,
// table length, pad per sequence slot); output rows at OUTS_AT; block tables at TABLES_AT;
// query tiles at TILES_AT (first row, row count per tile: consecutive rows of one sequence at
// consecutive positions, at most the layout's tile_rows of them; attention_coop's workgroups).
// A position p of a sequence lives in physical block table[(p / BLOCK) % length], slot
// p % BLOCK of it: a paged sequence's table lists its blocks in order; a ring slot is one block
// of BLOCK = context positions, so positions wrap in it (the sliding window).
// Constants: SEQS_AT, OUTS_AT, TABLES_AT, TILES_AT, BLOCK.

fn row_seq(t: u32) -> u32 {
    return plan[2u * t];
}

// Absolute position of row t (RoPE, the causal limit).
fn row_pos(t: u32) -> u32 {
    return plan[2u * t + 1u];
}

// Oldest position sequence s still holds (the sliding window); older ones are not attended.
fn seq_kv_lo(s: u32) -> u32 {
    return plan[SEQS_AT + 4u * s];
}

// Sequence s's block table: where it starts in the plan, its length, and the first slot of its
// first block (read once per kernel).
struct SeqTable {
    at: u32,
    len: u32,
    base: u32,
}

fn seq_table(s: u32) -> SeqTable {
    let at = TABLES_AT + plan[SEQS_AT + 4u * s + 1u];
    return SeqTable(at, plan[SEQS_AT + 4u * s + 2u], plan[at] * BLOCK);
}

// The KV-cache slot (row of K and V) of position pos of the sequence whose table is `t`. A
// ring slot is one block: no lookup per position (it cost 1.5% of a decode step on the H200).
fn kv_slot_in(t: SeqTable, pos: u32) -> u32 {
    if (t.len == 1u) {
        return t.base + pos % BLOCK;
    }
    return plan[t.at + (pos / BLOCK) % t.len] * BLOCK + pos % BLOCK;
}

// The KV-cache slot of position pos of sequence s.
fn kv_slot(s: u32, pos: u32) -> u32 {
    return kv_slot_in(seq_table(s), pos);
}

// The step row whose logits output i holds.
fn out_row(i: u32) -> u32 {
    return plan[OUTS_AT + i];
}

// The first row of query tile i, and its row count.
fn tile_first_row(i: u32) -> u32 {
    return plan[TILES_AT + 2u * i];
}

fn tile_rows(i: u32) -> u32 {
    return plan[TILES_AT + 2u * i + 1u];
}
