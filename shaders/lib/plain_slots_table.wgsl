// attention_plain's KV slots looked up once per position into workgroup memory before the
// scores (published by the barrier that follows fill_slots), so a paged sequence's block table
// costs one dependent load a position for the whole kernel instead of one per score and V
// load (steps of a few rows, attention_plain::SLOT_TABLE_MAX_ROWS).
var<workgroup> slots: array<u32, PLAIN_MAX>;

fn fill_slots(lid: u32, n: u32) {
    for (var j = lid; j < n; j += WG_THREADS) {
        slots[j] = kv_slot_in(table, kv_lo + j);
    }
}

fn slot_at(j: u32) -> u32 {
    return slots[j];
}
