//! Full blocks indexed by the tokens they hold (paged layout): once a sequence has written all
//! positions of a block, the block is indexed under a hash of every token from the start of
//! the sequence to the block's end. A new sequence whose prompt starts with the same tokens
//! takes those blocks by reference (their keys and values are the same) instead of running
//! them. A block no sequence holds stays indexed, and reusable, until it is handed out again.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

#[derive(Default)]
pub(super) struct PrefixIndex {
    by_key: HashMap<u64, u32>,
    key_of: HashMap<u32, u64>,
}

/// The key of a block holding `tokens`, after the prefix whose key is `parent` (0 at the start).
pub(super) fn key(parent: u64, tokens: &[u32]) -> u64 {
    // SipHash with fixed keys: the same tokens give the same key in every process.
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish().max(1)
}

impl PrefixIndex {
    pub fn get(&self, key: u64) -> Option<u32> {
        self.by_key.get(&key).copied()
    }

    /// Indexes `block` under `key`, unless another block already holds that prefix.
    pub fn insert(&mut self, key: u64, block: u32) {
        if !self.by_key.contains_key(&key) && !self.key_of.contains_key(&block) {
            self.by_key.insert(key, block);
            self.key_of.insert(block, key);
        }
    }

    /// `block` is about to hold other tokens.
    pub fn forget(&mut self, block: u32) {
        if let Some(k) = self.key_of.remove(&block) {
            self.by_key.remove(&k);
        }
    }
}
