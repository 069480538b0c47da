//! Named scenarios from the contract: copy-on-write after fork, prefix reuse across requests,
//! exact-multiple prompts, atomic OutOfBlocks, LRU eviction, truncation, idle after release.

use ponder_kvcache::{CopyBlock, KvCacheConfig, KvCacheError, KvCacheManager, Result, Slot};

use crate::util::{idle, snapshot, Shadow};

fn kv(block_size: usize, num_blocks: usize) -> Result<KvCacheManager> {
    KvCacheManager::new(KvCacheConfig {
        block_size,
        num_blocks,
    })
}

/// Opens `seq` with `prompt`, appends the uncached rest, and mirrors the writes in `shadow`.
fn prefill(
    kv: &mut KvCacheManager,
    shadow: &mut Shadow,
    seq: u64,
    prompt: &[u32],
) -> Result<usize> {
    let cached = kv.open(seq, prompt)?;
    let a = kv.append(seq, &prompt[cached..])?;
    shadow.apply(&a, &prompt[cached..]);
    Ok(cached)
}

fn check(kv: &KvCacheManager, shadow: &Shadow, seqs: &[u64]) {
    assert_eq!(kv.check_invariants(), Ok(()));
    shadow.verify(kv, seqs);
}

#[test]
fn fork_then_divergent_appends_copy_exactly_one_partial_block() -> Result<()> {
    let mut kv = kv(4, 16)?;
    let mut sh = Shadow::new(&kv);
    prefill(&mut kv, &mut sh, 1, &[1, 2, 3, 4, 5, 6])?; // blocks [0 full, 1 with 2 tokens]
    kv.fork(1, 2)?;
    assert_eq!(kv.block_table(2), kv.block_table(1));
    assert_eq!(kv.tokens(2), kv.tokens(1));
    assert_eq!(
        kv.blocks_needed(2, 5),
        2,
        "one copy-on-write block plus one fresh block"
    );

    let child = kv.append(2, &[7, 8, 9, 10, 11])?;
    sh.apply(&child, &[7, 8, 9, 10, 11]);
    assert_eq!(
        child.copies,
        vec![CopyBlock {
            src: 1,
            dst: 2,
            tokens: 2
        }]
    );
    assert_eq!(
        child.slots[0],
        Slot {
            block: 2,
            offset: 2
        }
    );
    check(&kv, &sh, &[1, 2]);

    // The parent's partial block is private again: it appends in place, no copy.
    let parent = kv.append(1, &[70, 80, 90])?;
    sh.apply(&parent, &[70, 80, 90]);
    assert!(parent.copies.is_empty());
    assert_eq!(
        parent.slots[0],
        Slot {
            block: 1,
            offset: 2
        }
    );
    let child = kv.append(2, &[12, 13])?;
    sh.apply(&child, &[12, 13]);
    assert!(child.copies.is_empty());
    assert_eq!(
        kv.block_table(1).map(|t| t[0]),
        kv.block_table(2).map(|t| t[0]),
        "full block still shared"
    );
    check(&kv, &sh, &[1, 2]);
    Ok(())
}

#[test]
fn fork_at_a_block_boundary_never_copies_a_full_block() -> Result<()> {
    let mut kv = kv(4, 16)?;
    let mut sh = Shadow::new(&kv);
    prefill(&mut kv, &mut sh, 1, &[1, 2, 3, 4, 5, 6, 7, 8])?;
    kv.fork(1, 2)?;
    kv.fork(1, 3)?;
    for (seq, tok) in [(1u64, 100u32), (2, 200), (3, 300)] {
        assert_eq!(kv.blocks_needed(seq, 1), 1);
        let a = kv.append(seq, &[tok, tok + 1])?;
        sh.apply(&a, &[tok, tok + 1]);
        assert!(
            a.copies.is_empty(),
            "seq {seq} copied a full block: {:?}",
            a.copies
        );
    }
    let stats = kv.stats();
    assert_eq!(
        stats.used_blocks,
        2 + 3,
        "two shared full blocks, one private block each"
    );
    check(&kv, &sh, &[1, 2, 3]);
    Ok(())
}

#[test]
fn second_request_with_same_system_prompt_reuses_its_whole_blocks() -> Result<()> {
    let mut kv = kv(4, 32)?;
    let mut sh = Shadow::new(&kv);
    let system: Vec<u32> = (100..112).collect(); // 3 blocks of 4
    let first = [system.as_slice(), &[1, 2, 3]].concat();
    let second = [system.as_slice(), &[9, 9, 9, 9, 9]].concat();

    assert_eq!(prefill(&mut kv, &mut sh, 1, &first)?, 0);
    let cached = kv.open(2, &second)?;
    assert_eq!(cached, 12, "exactly the three system-prompt blocks");
    assert_eq!(kv.seq_len(2), 12);
    assert!(
        cached < second.len(),
        "at least one token is left to compute"
    );
    assert_eq!(kv.block_table(2), kv.block_table(1).map(|t| &t[..3]));
    assert_eq!(kv.tokens(2), Some(&system[..]));
    assert_eq!(kv.stats().reused_tokens, 12);
    let a = kv.append(2, &second[cached..])?;
    sh.apply(&a, &second[cached..]);
    assert!(a.copies.is_empty());
    check(&kv, &sh, &[1, 2]);

    // The same holds once the first request has finished: its blocks wait in the cache.
    kv.release(1);
    kv.release(2);
    assert_eq!(kv.stats().used_blocks, 0);
    assert_eq!(kv.open(3, &first)?, 12);
    assert_eq!(kv.stats().reused_tokens, 24);
    check(&kv, &sh, &[3]);
    Ok(())
}

#[test]
fn prompt_that_is_an_exact_multiple_of_block_size_reuses_all_but_the_last_block() -> Result<()> {
    let mut kv = kv(4, 16)?;
    let mut sh = Shadow::new(&kv);
    let prompt: Vec<u32> = (1..=12).collect();
    prefill(&mut kv, &mut sh, 1, &prompt)?;
    kv.release(1);
    assert_eq!(kv.stats().cached_blocks, 3);
    assert_eq!(kv.open(2, &prompt)?, 8);
    assert_eq!(
        kv.open(3, &prompt[..4])?,
        0,
        "a one-block prompt reuses nothing"
    );
    assert_eq!(kv.open(4, &prompt[..5])?, 4);
    assert_eq!(kv.open(5, &[])?, 0);
    check(&kv, &sh, &[2, 3, 4, 5]);
    Ok(())
}

#[test]
fn out_of_blocks_is_atomic() -> Result<()> {
    let mut kv = kv(4, 4)?;
    let mut sh = Shadow::new(&kv);
    prefill(&mut kv, &mut sh, 1, &[1, 2, 3, 4, 5, 6])?; // 2 blocks
    kv.fork(1, 2)?;
    prefill(&mut kv, &mut sh, 3, &[9, 9, 9, 9, 9])?; // 2 more: the pool is full
    assert_eq!(kv.available_blocks(), 0);
    let live = [1, 2, 3];
    let before = snapshot(&kv, &live);
    // Needs a copy of the shared partial block plus one more block.
    assert_eq!(
        kv.append(2, &[7, 7, 7]),
        Err(KvCacheError::OutOfBlocks { needed: 2, free: 0 })
    );
    assert_eq!(
        kv.append(3, &[8; 4]),
        Err(KvCacheError::OutOfBlocks { needed: 1, free: 0 })
    );
    assert_eq!(snapshot(&kv, &live), before);
    check(&kv, &sh, &live);

    // Freeing one block is still not enough for the first, and enough for a smaller request.
    kv.release(3); // its full block stays cached (evictable), its partial block is freed
    assert_eq!(kv.available_blocks(), 2);
    let before = snapshot(&kv, &[1, 2]);
    assert_eq!(
        kv.append(2, &[7; 7]),
        Err(KvCacheError::OutOfBlocks { needed: 3, free: 2 })
    );
    assert_eq!(
        snapshot(&kv, &[1, 2]),
        before,
        "no eviction happens when the request fails"
    );
    let a = kv.append(2, &[7; 6])?;
    sh.apply(&a, &[7; 6]);
    assert_eq!(a.copies.len(), 1);
    assert_eq!(kv.stats().evictions, 1);
    check(&kv, &sh, &[1, 2]);
    Ok(())
}

#[test]
fn eviction_takes_the_least_recently_used_leaves_first() -> Result<()> {
    let mut kv = kv(2, 8)?;
    let mut sh = Shadow::new(&kv);
    let a = [1, 1, 2, 2, 3, 3, 0]; // 3 full blocks
    let b = [5, 5, 6, 6, 0]; // 2 full blocks
    prefill(&mut kv, &mut sh, 1, &a)?;
    prefill(&mut kv, &mut sh, 2, &b)?;
    kv.release(1);
    kv.release(2);
    assert_eq!(kv.stats().cached_blocks, 5);
    // Touch `a` so that `b` is now the least recently used prefix.
    assert_eq!(kv.open(3, &a)?, 6);
    kv.release(3);
    // 3 free blocks; 5 tokens need 3 blocks, 7 tokens need 4: one eviction, a leaf of `b`.
    prefill(&mut kv, &mut sh, 4, &[8; 7])?;
    assert_eq!(kv.stats().evictions, 1);
    assert_eq!(kv.open(5, &a)?, 6, "a is intact");
    assert_eq!(kv.open(6, &b)?, 2, "b lost its leaf, kept its root block");
    check(&kv, &sh, &[4, 5, 6]);
    Ok(())
}

#[test]
fn truncate_frees_dropped_blocks_and_copies_an_indexed_block_before_rewriting_it() -> Result<()> {
    let mut kv = kv(4, 8)?;
    let mut sh = Shadow::new(&kv);
    prefill(&mut kv, &mut sh, 1, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10])?; // 3 blocks, 2 indexed
    let free = kv.stats().free_blocks;
    kv.truncate(1, 6)?;
    assert_eq!(kv.seq_len(1), 6);
    assert_eq!(
        kv.stats().free_blocks,
        free + 1,
        "the private partial block is freed"
    );
    assert_eq!(
        kv.blocks_needed(1, 1),
        1,
        "block 1 is indexed: rewriting it needs a copy"
    );
    let a = kv.append(1, &[60, 70])?;
    sh.apply(&a, &[60, 70]);
    assert_eq!(
        a.copies,
        vec![CopyBlock {
            src: 1,
            dst: a.slots[0].block,
            tokens: 2
        }]
    );
    assert_eq!(
        kv.indexed_prefix(1),
        Some(vec![1, 2, 3, 4, 5, 6, 7, 8]),
        "cached block intact"
    );
    assert_eq!(
        kv.truncate(1, 9),
        Err(KvCacheError::TruncateBeyondEnd {
            seq: 1,
            len: 9,
            seq_len: 8
        })
    );
    kv.truncate(1, 0)?;
    assert_eq!(kv.block_table(1), Some(&[][..]));
    check(&kv, &sh, &[1]);
    Ok(())
}

#[test]
fn release_returns_every_block_to_free_or_cached_and_an_empty_index_is_idle() -> Result<()> {
    let mut kv = kv(4, 24)?;
    let mut sh = Shadow::new(&kv);
    let total = kv.stats().total_blocks;
    assert_eq!(kv.stats(), idle(total, &kv.stats()));
    prefill(&mut kv, &mut sh, 1, &(0..13).collect::<Vec<_>>())?;
    kv.fork(1, 2)?;
    let a = kv.append(2, &[1, 2, 3, 4, 5, 6])?;
    sh.apply(&a, &[1, 2, 3, 4, 5, 6]);
    prefill(&mut kv, &mut sh, 3, &(0..9).collect::<Vec<_>>())?;
    kv.truncate(1, 7)?;
    check(&kv, &sh, &[1, 2, 3]);
    for seq in [2, 1, 3] {
        kv.release(seq);
        assert_eq!(kv.check_invariants(), Ok(()));
    }
    let st = kv.stats();
    assert_eq!(st.used_blocks, 0);
    assert!(st.cached_blocks > 0);
    assert_eq!(st.free_blocks + st.cached_blocks, total);
    assert_eq!(kv.available_blocks(), total);
    assert_eq!(kv.reset_prefix_cache()?, st.cached_blocks);
    assert_eq!(kv.stats(), idle(total, &kv.stats()));
    assert_eq!(kv.check_invariants(), Ok(()));

    // Without any full block the index never fills, and release alone restores the baseline.
    kv.open(4, &[])?;
    kv.append(4, &[1, 2])?;
    kv.fork(4, 5)?;
    kv.append(5, &[3])?;
    assert_eq!(kv.stats().used_blocks, 2, "one shared block, one copy");
    kv.release(4);
    kv.release(5);
    assert_eq!(kv.stats(), idle(total, &kv.stats()));
    Ok(())
}

#[test]
fn duplicate_path_keeps_the_cached_block_and_the_new_one_stays_private() -> Result<()> {
    let mut kv = kv(2, 8)?;
    let mut sh = Shadow::new(&kv);
    prefill(&mut kv, &mut sh, 1, &[1, 2, 3])?;
    prefill(&mut kv, &mut sh, 2, &[1, 2, 3])?; // reuses seq 1's full block
    assert_eq!(kv.block_table(2).map(|t| t[0]), Some(0));
    kv.open(3, &[])?;
    let a = kv.append(3, &[1, 2])?; // computed again without reuse: a duplicate path
    sh.apply(&a, &[1, 2]);
    let dup = a.slots[0].block;
    assert_ne!(dup, 0);
    assert_eq!(kv.indexed_prefix(0), Some(vec![1, 2]));
    assert_eq!(kv.indexed_prefix(dup), None);
    let free = kv.stats().free_blocks;
    kv.release(3);
    assert_eq!(
        kv.stats().free_blocks,
        free + 1,
        "the private duplicate is freed, not cached"
    );
    check(&kv, &sh, &[1, 2]);
    Ok(())
}
