// attention_plain's KV slots looked up through the sequence's table where they are used (steps
// of many rows: a slot table in workgroup memory cost the batch sweep's 64-row steps 1-2% on
// an H100, docs/PERF.md).
fn fill_slots(lid: u32, n: u32) {}

fn slot_at(j: u32) -> u32 {
    return kv_slot_in(table, kv_lo + j);
}
