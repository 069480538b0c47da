//! Seeded random-operation test: thousands of opens (prompts sharing a few prefixes), appends,
//! forks, truncations and releases on a tiny pool, so that OutOfBlocks, eviction, prefix reuse
//! and copy-on-write all happen; `check_invariants` and the shadow memory run after every op.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use ponder_kvcache::{KvCacheConfig, KvCacheError, KvCacheManager, SeqId};

use crate::util::{idle, snapshot, Shadow};

/// What happened over one run, so the test can insist every path was exercised.
#[derive(Debug, Default)]
struct Coverage {
    out_of_blocks: usize,
    copies: usize,
    forks: usize,
    truncates: usize,
}

fn run(seed: u64, ops: usize, block_size: usize, num_blocks: usize) -> Coverage {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut kv = KvCacheManager::new(KvCacheConfig {
        block_size,
        num_blocks,
    })
    .expect("valid config");
    let mut shadow = Shadow::new(&kv);
    let mut cov = Coverage::default();
    // A tiny vocabulary makes independent sequences collide on whole-block paths (duplicates).
    let prefixes: Vec<Vec<u32>> = (0..3)
        .map(|_| {
            let len = rng.random_range(block_size..4 * block_size);
            (0..len).map(|_| rng.random_range(0..3)).collect()
        })
        .collect();
    let mut live: Vec<SeqId> = Vec::new();
    let mut next_id: SeqId = 0;

    for step in 0..ops {
        let ctx = format!("seed {seed} step {step}");
        let pick = |rng: &mut ChaCha8Rng, live: &[SeqId]| live[rng.random_range(0..live.len())];
        match rng.random_range(0..100) {
            // open a prompt = shared prefix (maybe cut) + random suffix, then prefill it
            0..=24 if live.len() < 8 => {
                let base = &prefixes[rng.random_range(0..prefixes.len())];
                let cut = rng.random_range(0..=base.len());
                let mut prompt = base[..cut].to_vec();
                prompt.extend(
                    (0..rng.random_range(0..2 * block_size)).map(|_| rng.random_range(0..3)),
                );
                let seq = next_id;
                next_id += 1;
                let cached = kv.open(seq, &prompt).expect("open never allocates");
                assert_eq!(cached % block_size, 0, "{ctx}");
                assert!(
                    cached < prompt.len() || prompt.is_empty(),
                    "{ctx}: whole prompt reused"
                );
                assert_eq!(kv.tokens(seq), Some(&prompt[..cached]), "{ctx}");
                live.push(seq);
                let rest = &prompt[cached..];
                let before = snapshot(&kv, &live);
                let needed = kv.blocks_needed(seq, rest.len());
                match kv.append(seq, rest) {
                    Ok(a) => shadow.apply(&a, rest),
                    Err(KvCacheError::OutOfBlocks { needed: n, .. }) => {
                        assert_eq!(n, needed, "{ctx}");
                        assert_eq!(
                            snapshot(&kv, &live),
                            before,
                            "{ctx}: failed prefill changed state"
                        );
                        cov.out_of_blocks += 1;
                        kv.release(seq); // a scheduler would requeue the request
                        live.retain(|&s| s != seq);
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
            }
            // append a few decoded tokens
            0..=59 if !live.is_empty() => {
                let seq = pick(&mut rng, &live);
                let toks: Vec<u32> = (0..rng.random_range(1..=block_size + 2))
                    .map(|_| rng.random_range(0..3))
                    .collect();
                let needed = kv.blocks_needed(seq, toks.len());
                let available = kv.available_blocks();
                let last = kv.block_table(seq).and_then(|t| t.last().copied());
                let before = snapshot(&kv, &live);
                match kv.append(seq, &toks) {
                    Ok(a) => {
                        assert!(
                            needed <= available,
                            "{ctx}: succeeded beyond available_blocks"
                        );
                        assert!(a.copies.len() <= 1, "{ctx}");
                        if let Some(c) = a.copies.first() {
                            assert_eq!(
                                Some(c.src),
                                last,
                                "{ctx}: copied a block other than the last"
                            );
                            cov.copies += 1;
                        }
                        assert_eq!(a.slots.len(), toks.len(), "{ctx}");
                        shadow.apply(&a, &toks);
                    }
                    Err(KvCacheError::OutOfBlocks { needed: n, free }) => {
                        assert_eq!((n, free), (needed, available), "{ctx}");
                        assert!(
                            needed > available,
                            "{ctx}: refused although blocks were available"
                        );
                        assert_eq!(
                            snapshot(&kv, &live),
                            before,
                            "{ctx}: failed append changed state"
                        );
                        cov.out_of_blocks += 1;
                    }
                    Err(e) => panic!("{ctx}: {e}"),
                }
            }
            0..=74 if !live.is_empty() && live.len() < 8 => {
                let parent = pick(&mut rng, &live);
                let child = next_id;
                next_id += 1;
                kv.fork(parent, child).expect("fork never allocates");
                assert_eq!(kv.tokens(child), kv.tokens(parent), "{ctx}");
                live.push(child);
                cov.forks += 1;
            }
            0..=84 if !live.is_empty() => {
                let seq = pick(&mut rng, &live);
                let len = rng.random_range(0..=kv.seq_len(seq));
                kv.truncate(seq, len).expect("truncate within length");
                assert_eq!(kv.seq_len(seq), len, "{ctx}");
                cov.truncates += 1;
            }
            _ if !live.is_empty() => {
                let seq = live.swap_remove(rng.random_range(0..live.len()));
                kv.release(seq);
                assert_eq!(kv.block_table(seq), None, "{ctx}");
            }
            _ => {}
        }
        if let Err(violation) = kv.check_invariants() {
            panic!("{ctx}: {violation}");
        }
        shadow.verify(&kv, &live);
    }

    for seq in live.drain(..) {
        kv.release(seq);
    }
    let st = kv.stats();
    assert_eq!(
        st.used_blocks, 0,
        "seed {seed}: blocks leaked after releasing everything"
    );
    assert_eq!(kv.available_blocks(), num_blocks, "seed {seed}");
    kv.reset_prefix_cache().expect("consistent bookkeeping");
    assert_eq!(kv.stats(), idle(num_blocks, &kv.stats()), "seed {seed}");
    assert!(
        kv.stats().evictions > 0 && kv.stats().reused_tokens > 0,
        "seed {seed}: {:?}",
        kv.stats()
    );
    cov
}

#[test]
fn random_ops_keep_every_invariant_under_a_tiny_pool() {
    for seed in 0..8 {
        let cov = run(seed, 3000, 4, 14);
        assert!(
            cov.out_of_blocks > 0 && cov.copies > 0 && cov.forks > 0 && cov.truncates > 0,
            "seed {seed}: {cov:?}"
        );
    }
}

#[test]
fn random_ops_with_one_token_blocks_and_a_roomier_pool() {
    // block_size 1 has no partial blocks (no copy-on-write); block_size 3 with more blocks
    // exercises deep radix paths.
    for seed in 100..104 {
        run(seed, 2000, 1, 24);
        run(seed, 2000, 3, 40);
    }
}
