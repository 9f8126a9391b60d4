//! Paged KV-cache bookkeeping (the host side of PagedAttention, Kwon et al. 2023, "Efficient
//! Memory Management for Large Language Model Serving with PagedAttention"): the cache is a
//! pool of fixed-size blocks of `block_size` token positions each, and every sequence owns a
//! [`BlockTable`] listing its blocks in order, so sequences of any length share one pool
//! without fragmentation.
//!
//! Prefix caching: a block whose `block_size` positions are all written gets a hash of its
//! tokens chained with the hash of the block before it (so equal hashes mean equal prefixes),
//! and stays in the pool after its sequences end. A new sequence whose prompt starts with the
//! same full blocks takes them over (reference counted) and skips their prefill. A cached
//! block nobody uses is evicted, least recently used first, when a fresh block is needed. The
//! block's tokens are kept beside the hash and compared on every hit, so a hash collision can
//! never hand a sequence another prompt's keys and values.
//!
//! This module decides which block holds which positions; the device memory is the serving
//! engine's (one tensor of `num_blocks × block_size` positions per layer, indexed by block id).

use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};

use crate::{Error, Result};

/// A block id: the block's index in the pool (and in the engine's KV tensors).
pub type BlockId = u32;

#[derive(Clone, Debug, Default)]
struct Block {
    /// Sequences using the block.
    refs: u32,
    /// For a full block: its chained hash and tokens (the key of the prefix cache).
    key: Option<(u64, Box<[u32]>)>,
    /// When the block was last released, for least-recently-used eviction.
    released_at: u64,
}

/// One sequence's blocks in order, and how many token positions it holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BlockTable {
    blocks: Vec<BlockId>,
    tokens: Vec<u32>,
    /// The chained hash of the full blocks so far.
    chain: u64,
    /// Positions at the start whose keys and values were already in the cache when the table
    /// was made (their prefill can be skipped).
    cached: usize,
}

impl BlockTable {
    /// The blocks, in position order: position `p` lives in `blocks()[p / block_size]` at
    /// offset `p % block_size`.
    pub fn blocks(&self) -> &[BlockId] {
        &self.blocks
    }

    /// Token positions held.
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Whether the table holds no positions.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Leading positions that came from the prefix cache (already computed).
    pub fn cached_tokens(&self) -> usize {
        self.cached
    }
}

/// The pool of KV-cache blocks: allocation, sharing of cached prefixes and eviction.
#[derive(Debug)]
pub struct BlockPool {
    block_size: usize,
    blocks: Vec<Block>,
    /// Blocks holding nothing, ready to use.
    free: Vec<BlockId>,
    /// Full blocks by key hash (the prefix cache), in use or not.
    cached: HashMap<u64, BlockId>,
    /// The cached blocks nobody uses, least recently released first (what eviction takes):
    /// with the free list, what a new allocation can take, counted without a scan.
    idle: BTreeSet<(u64, BlockId)>,
    /// Blocks with at least one reference.
    in_use: usize,
    clock: u64,
}

/// The chained hash of a full block: its tokens after the previous block's hash.
fn block_hash(prev: u64, tokens: &[u32]) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prev.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

impl BlockPool {
    /// A pool of `num_blocks` blocks of `block_size` positions.
    ///
    /// # Errors
    /// [`Error::Invalid`] for zero blocks, a zero block size, or more blocks than a [`BlockId`]
    /// counts.
    pub fn new(num_blocks: usize, block_size: usize) -> Result<BlockPool> {
        if num_blocks == 0 || block_size == 0 || num_blocks > BlockId::MAX as usize {
            return Err(Error::Invalid {
                what: "KV-cache block pool",
                detail: format!(
                    "{num_blocks} blocks of {block_size} positions: both must be positive (and \
                     the blocks at most {})",
                    BlockId::MAX
                ),
            });
        }
        Ok(BlockPool {
            block_size,
            blocks: vec![Block::default(); num_blocks],
            // Popped from the end: lower ids first.
            free: (0..num_blocks as BlockId).rev().collect(),
            cached: HashMap::new(),
            idle: BTreeSet::new(),
            in_use: 0,
            clock: 0,
        })
    }

    /// Positions per block.
    pub fn block_size(&self) -> usize {
        self.block_size
    }

    /// Blocks in the pool.
    pub fn num_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Blocks a new allocation can take: the free ones and the cached ones nobody uses.
    pub fn available(&self) -> usize {
        self.free.len() + self.idle.len()
    }

    /// Blocks in use by at least one sequence.
    pub fn in_use(&self) -> usize {
        self.in_use
    }

    /// A block for new positions: a free one, else the least recently released cached one
    /// (which leaves the prefix cache).
    fn take_fresh(&mut self) -> Option<BlockId> {
        if let Some(b) = self.free.pop() {
            return Some(b);
        }
        let (_, victim) = self.idle.pop_first()?;
        if let Some((hash, _)) = self.blocks[victim as usize].key.take() {
            self.cached.remove(&hash);
        }
        Some(victim)
    }

    /// One more sequence uses block `b` (a cached one nobody used stops being evictable).
    fn add_ref(&mut self, b: BlockId) {
        let block = &mut self.blocks[b as usize];
        if block.refs == 0 {
            self.in_use += 1;
            if block.key.is_some() {
                self.idle.remove(&(block.released_at, b));
            }
        }
        block.refs += 1;
    }

    /// Blocks `n` more positions of a table of `len` positions would need.
    fn blocks_for(&self, len: usize, n: usize) -> usize {
        (len + n).div_ceil(self.block_size) - len.div_ceil(self.block_size)
    }

    /// A table for a new sequence whose prompt is `tokens`: the longest run of full leading
    /// blocks found in the prefix cache is shared (reference counted), the rest gets fresh
    /// blocks. On failure nothing changes.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the pool cannot hold the prompt (the caller waits, or preempts
    /// another sequence, and tries again).
    pub fn allocate(&mut self, tokens: &[u32]) -> Result<BlockTable> {
        let bs = self.block_size;
        let (shared, prev) = self.cached_prefix(tokens);
        let cached = shared.len() * bs;
        let fresh_needed = self.blocks_for(cached, tokens.len() - cached);
        // Shared blocks nobody used are counted in `available` too: they stop being takeable.
        let idle_shared = shared
            .iter()
            .filter(|&&b| self.blocks[b as usize].refs == 0)
            .count();
        if self.available() - idle_shared < fresh_needed {
            return Err(self.full(fresh_needed));
        }
        for &b in &shared {
            self.add_ref(b);
        }
        let mut table = BlockTable {
            blocks: shared,
            tokens: tokens[..cached].to_vec(),
            chain: prev,
            cached,
        };
        self.push_tokens(&mut table, &tokens[cached..])?;
        Ok(table)
    }

    /// The cached prefix of `tokens`: the full leading blocks whose chained hash and tokens
    /// match, and the chain's hash after them.
    fn cached_prefix(&self, tokens: &[u32]) -> (Vec<BlockId>, u64) {
        let mut shared = Vec::new();
        let mut prev = 0u64;
        for chunk in tokens.chunks_exact(self.block_size) {
            let h = block_hash(prev, chunk);
            match self.cached.get(&h) {
                Some(&b)
                    if self.blocks[b as usize]
                        .key
                        .as_ref()
                        .is_some_and(|(_, t)| **t == *chunk) =>
                {
                    shared.push(b);
                    prev = h;
                }
                _ => break,
            }
        }
        (shared, prev)
    }

    /// A table for a new sequence holding only the cached prefix of `tokens` (shared, reference
    /// counted; possibly empty). Its other positions are added chunk by chunk with
    /// [`BlockPool::append`] as they are computed, so a block enters the prefix cache only in
    /// the step that writes its keys and values. Takes no fresh block; cannot fail.
    pub fn share_prefix(&mut self, tokens: &[u32]) -> BlockTable {
        let (shared, chain) = self.cached_prefix(tokens);
        for &b in &shared {
            self.add_ref(b);
        }
        let cached = shared.len() * self.block_size;
        BlockTable {
            blocks: shared,
            tokens: tokens[..cached].to_vec(),
            chain,
            cached,
        }
    }

    fn full(&self, needed: usize) -> Error {
        Error::Invalid {
            what: "KV cache",
            detail: format!(
                "{needed} more blocks needed, {} of {} available",
                self.available(),
                self.blocks.len()
            ),
        }
    }

    /// Appends positions for `tokens` (decoded tokens, or the next chunk of a prompt) to
    /// `table`, taking fresh blocks as needed. Blocks this fills are entered in the prefix
    /// cache. On failure nothing changes.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the pool has too few blocks left.
    pub fn append(&mut self, table: &mut BlockTable, tokens: &[u32]) -> Result<()> {
        let needed = self.blocks_for(table.len(), tokens.len());
        if self.available() < needed {
            return Err(self.full(needed));
        }
        self.push_tokens(table, tokens)
    }

    /// [`BlockPool::append`] after the check.
    fn push_tokens(&mut self, table: &mut BlockTable, tokens: &[u32]) -> Result<()> {
        let bs = self.block_size;
        for &t in tokens {
            if table.tokens.len() == table.blocks.len() * bs {
                let b = self.take_fresh().ok_or_else(|| self.full(1))?;
                self.add_ref(b);
                table.blocks.push(b);
            }
            table.tokens.push(t);
            if table.tokens.len().is_multiple_of(bs) {
                self.seal(table);
            }
        }
        Ok(())
    }

    /// Enters `table`'s last block, just filled, in the prefix cache (unless an equal block is
    /// cached already: the first one stays the cache's).
    fn seal(&mut self, table: &mut BlockTable) {
        let bs = self.block_size;
        let n = table.tokens.len() / bs;
        let chunk = &table.tokens[(n - 1) * bs..n * bs];
        let h = block_hash(table.chain, chunk);
        table.chain = h;
        let b = table.blocks[n - 1];
        if self.blocks[b as usize].key.is_none() && !self.cached.contains_key(&h) {
            self.blocks[b as usize].key = Some((h, chunk.into()));
            self.cached.insert(h, b);
        }
    }

    /// Releases a finished (or preempted) sequence's blocks: full blocks stay in the prefix
    /// cache for later prompts (evicted least recently released first), partial ones become
    /// free.
    pub fn release(&mut self, table: BlockTable) {
        // Last block first: a chain's tail is evicted before its head, which more prompts
        // share.
        for &b in table.blocks.iter().rev() {
            self.clock += 1;
            let block = &mut self.blocks[b as usize];
            if block.refs == 0 {
                continue;
            }
            block.refs -= 1;
            if block.refs == 0 {
                self.in_use -= 1;
                block.released_at = self.clock;
                if block.key.is_some() {
                    self.idle.insert((self.clock, b));
                } else {
                    self.free.push(b);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_repeated_prompt_prefix_is_shared_and_its_partial_tail_is_not() {
        let mut pool = BlockPool::new(8, 4).unwrap();
        let system: Vec<u32> = (0..8).collect();
        let mut a_prompt = system.clone();
        a_prompt.extend([100, 101]);
        let a = pool.allocate(&a_prompt).unwrap();
        assert_eq!((a.blocks().len(), a.cached_tokens()), (3, 0));
        let mut b_prompt = system.clone();
        b_prompt.extend([200, 201, 202]);
        let b = pool.allocate(&b_prompt).unwrap();
        assert_eq!(b.cached_tokens(), 8);
        assert_eq!(&b.blocks()[..2], &a.blocks()[..2]);
        assert_ne!(b.blocks()[2], a.blocks()[2]);
        assert_eq!(pool.in_use(), 4);
        pool.release(a);
        pool.release(b);
        assert_eq!((pool.in_use(), pool.available()), (0, 8));
        // After both end, the cached prefix still serves a third prompt.
        let c = pool.allocate(&system).unwrap();
        assert_eq!(c.cached_tokens(), 8);
    }

    #[test]
    fn a_full_pool_refuses_without_changing_anything_and_evicts_a_chain_tail_first() {
        let mut pool = BlockPool::new(3, 2).unwrap();
        let a = pool.allocate(&[1, 2, 3, 4]).unwrap();
        assert_eq!(a.blocks(), &[0, 1]);
        assert!(pool.allocate(&[9, 9, 9, 9]).is_err());
        assert_eq!(pool.in_use(), 2);
        let mut b = pool.allocate(&[5]).unwrap();
        assert!(pool.append(&mut b, &[6, 7]).is_err());
        assert_eq!(b.len(), 1);
        pool.release(a);
        // [1, 2] and [3, 4] stay cached, unused: the next fresh block evicts the chain's tail.
        pool.append(&mut b, &[6, 7]).unwrap();
        assert_eq!((b.len(), b.blocks()), (3, &[2, 1][..]));
        let c = pool.allocate(&[1, 2]).unwrap();
        assert_eq!((c.cached_tokens(), c.blocks()), (2, &[0][..]));
    }

    #[test]
    fn equal_hashes_of_different_tokens_are_not_shared() {
        let mut pool = BlockPool::new(4, 2).unwrap();
        let a = pool.allocate(&[1, 2]).unwrap();
        // Forge a collision: the cache entry keeps its tokens, so a lookup compares them.
        let h = block_hash(0, &[3, 4]);
        let b = a.blocks()[0];
        pool.cached.insert(h, b);
        let c = pool.allocate(&[3, 4]).unwrap();
        assert_eq!(c.cached_tokens(), 0);
        assert_ne!(c.blocks()[0], b);
    }

    #[test]
    fn bad_pools_are_refused() {
        assert!(BlockPool::new(0, 16).is_err());
        assert!(BlockPool::new(16, 0).is_err());
    }

    proptest! {
        /// Random prompts (sharing prefixes), appends and releases: no block is ever in two
        /// tables unless it is a shared full prefix block with matching tokens; reference
        /// counts equal the tables holding each block; every table covers its positions; and
        /// once every table is released, every block is available again.
        #[test]
        fn bookkeeping_stays_consistent(
            ops in proptest::collection::vec((0u8..3, 0usize..4, 1usize..12, 0u32..3), 1..60)
        ) {
            let bs = 4;
            let mut pool = BlockPool::new(24, bs).unwrap();
            let prefixes: [Vec<u32>; 4] = [
                (0..8).collect(), (0..4).collect(), (50..62).collect(), vec![],
            ];
            let mut live: Vec<BlockTable> = Vec::new();
            for (op, which, n, salt) in ops {
                match op {
                    0 => {
                        let mut prompt = prefixes[which].clone();
                        prompt.extend((0..n as u32).map(|i| 1000 + i * 7 + salt));
                        if let Ok(t) = pool.allocate(&prompt) {
                            prop_assert_eq!(t.len(), prompt.len());
                            live.push(t);
                        }
                    }
                    1 if !live.is_empty() => {
                        let i = which % live.len();
                        let before = live[i].clone();
                        let extra: Vec<u32> = (0..n as u32).map(|i| 5000 + i + salt).collect();
                        if pool.append(&mut live[i], &extra).is_err() {
                            prop_assert_eq!(&live[i], &before);
                        }
                    }
                    _ if !live.is_empty() => {
                        let i = which % live.len();
                        pool.release(live.swap_remove(i));
                    }
                    _ => {}
                }
                let mut refs = vec![0u32; pool.num_blocks()];
                for t in &live {
                    prop_assert_eq!(t.blocks().len(), t.len().div_ceil(bs));
                    for (k, &b) in t.blocks().iter().enumerate() {
                        refs[b as usize] += 1;
                        let mine = &t.tokens[k * bs..((k + 1) * bs).min(t.len())];
                        // A block shared with another table holds the same tokens there.
                        for u in &live {
                            if std::ptr::eq(t, u) { continue; }
                            if let Some(j) = u.blocks().iter().position(|&x| x == b) {
                                prop_assert_eq!(j, k);
                                let theirs = &u.tokens[j * bs..((j + 1) * bs).min(u.len())];
                                prop_assert_eq!(mine.len(), bs);
                                prop_assert_eq!(mine, theirs);
                            }
                        }
                    }
                }
                for (b, block) in pool.blocks.iter().enumerate() {
                    prop_assert_eq!(block.refs, refs[b]);
                }
                // The counts kept as blocks change hands equal a scan of the blocks.
                let used = pool.blocks.iter().filter(|b| b.refs > 0).count();
                let idle = pool.blocks.iter().filter(|b| b.refs == 0 && b.key.is_some()).count();
                prop_assert_eq!(pool.in_use(), used);
                prop_assert_eq!(pool.available(), pool.free.len() + idle);
                prop_assert_eq!(pool.available() + pool.in_use(), pool.num_blocks());
            }
            for t in live.drain(..) {
                pool.release(t);
            }
            prop_assert_eq!(pool.available(), pool.num_blocks());
        }
    }
}
