//! Test helpers: a shadow KV memory that plays the tensor layer, and state snapshots.

use ponder_kvcache::{Appended, KvCacheManager, KvCacheStats, SeqId};

/// What the tensor layer would hold: per block, per offset, the token whose K/V was written.
pub(crate) struct Shadow {
    block_size: usize,
    mem: Vec<Vec<Option<u32>>>,
}

impl Shadow {
    pub(crate) fn new(kv: &KvCacheManager) -> Self {
        let total = kv.stats().total_blocks;
        Self {
            block_size: kv.block_size(),
            mem: vec![vec![None; kv.block_size()]; total],
        }
    }

    /// Applies `appended` as the tensor layer must: copies first, then one write per slot.
    pub(crate) fn apply(&mut self, appended: &Appended, tokens: &[u32]) {
        assert_eq!(
            appended.slots.len(),
            tokens.len(),
            "one slot per appended token"
        );
        for c in &appended.copies {
            assert_ne!(c.src, c.dst);
            assert!(
                c.tokens > 0 && c.tokens < self.block_size,
                "only partial blocks are copied: {c:?}"
            );
            let src = self.mem[c.src as usize][..c.tokens].to_vec();
            self.mem[c.dst as usize][..c.tokens].copy_from_slice(&src);
        }
        for (slot, &t) in appended.slots.iter().zip(tokens) {
            self.mem[slot.block as usize][slot.offset] = Some(t);
        }
    }

    /// Every position of every live sequence reads back its own token, and every indexed block
    /// holds the last chunk of its index path: nobody wrote into a block someone else relies on.
    pub(crate) fn verify(&self, kv: &KvCacheManager, seqs: &[SeqId]) {
        let bs = self.block_size;
        for &seq in seqs {
            let table = kv.block_table(seq).expect("live sequence has a table");
            let tokens = kv.tokens(seq).expect("live sequence has tokens");
            for (pos, &t) in tokens.iter().enumerate() {
                let got = self.mem[table[pos / bs] as usize][pos % bs];
                assert_eq!(got, Some(t), "seq {seq} position {pos} reads the wrong K/V");
            }
        }
        for block in 0..self.mem.len() as u32 {
            if let Some(path) = kv.indexed_prefix(block) {
                let want: Vec<_> = path[path.len() - bs..].iter().copied().map(Some).collect();
                assert_eq!(
                    self.mem[block as usize], want,
                    "indexed block {block} was overwritten"
                );
            }
        }
    }
}

/// Everything observable about the cache, to assert that a failed operation changed nothing.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    stats: KvCacheStats,
    available: usize,
    seqs: Vec<(SeqId, Vec<u32>, Vec<u32>)>,
    indexed: Vec<Option<Vec<u32>>>,
}

pub(crate) fn snapshot(kv: &KvCacheManager, seqs: &[SeqId]) -> Snapshot {
    let stats = kv.stats();
    let mut ids = seqs.to_vec();
    ids.sort_unstable();
    Snapshot {
        available: kv.available_blocks(),
        seqs: ids
            .into_iter()
            .map(|s| {
                (
                    s,
                    kv.block_table(s).unwrap_or_default().to_vec(),
                    kv.tokens(s).unwrap_or_default().to_vec(),
                )
            })
            .collect(),
        indexed: (0..stats.total_blocks as u32)
            .map(|b| kv.indexed_prefix(b))
            .collect(),
        stats,
    }
}

/// The stats of a cache holding nothing, with the cumulative counters of `now`.
pub(crate) fn idle(total_blocks: usize, now: &KvCacheStats) -> KvCacheStats {
    KvCacheStats {
        total_blocks,
        free_blocks: total_blocks,
        evictions: now.evictions,
        reused_tokens: now.reused_tokens,
        ..KvCacheStats::default()
    }
}
