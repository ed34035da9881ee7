//! One sequence's share of the KV memory: its blocks, in position order, and how many
//! positions it has written.

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SeqKv {
    /// Physical blocks, in position order (a ring slot: its one block).
    pub blocks: Vec<u32>,
    /// Positions written so far (the next token's position); positions keep counting (RoPE)
    /// when a ring wraps.
    len: u32,
    /// The most positions ever written since the last reset or truncation, taken-back ones
    /// included: a step taken back at position `context` of a ring has overwritten slot 0.
    written: u32,
    /// Leading blocks indexed by their prefix (paged), and the key of the last one.
    pub(super) indexed: u32,
    pub(super) prefix_key: u64,
}

impl SeqKv {
    /// The next token's position.
    pub fn len(&self) -> u32 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records `n` positions as written (after `KvCache::grow` made room for them).
    pub fn advance(&mut self, n: u32) {
        self.len += n;
        self.written = self.written.max(self.len);
    }

    /// Takes back the last `n` positions (a step queued for a token that ended the generation);
    /// their slots are rewritten by whatever runs there next.
    pub fn retreat(&mut self, n: u32) {
        self.len = self.len.saturating_sub(n);
    }

    /// Forgets every position; the blocks stay held.
    pub fn reset(&mut self) {
        self.len = 0;
        self.written = 0;
        self.indexed = 0;
        self.prefix_key = 0;
    }

    /// Keeps the first `pos` positions (a shared chat prefix), if they are still held: a
    /// ring that has wrapped (positions past `context` written, even by a step taken back)
    /// has overwritten them, so it starts over.
    pub fn truncate(&mut self, pos: u32, context: u32) {
        if pos < self.len {
            self.len = if self.written <= context { pos } else { 0 };
            self.written = self.len;
        }
    }
}
