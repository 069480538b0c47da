//! Tests of `paged_attention` against `attention_reference` and of its numerics contract:
//! bitwise invariance to batch, sharing, chunking and thread count; the block-load stats; and
//! argument errors. Random data comes from seeded ChaCha RNGs, so every failure replays.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::plan::Sharing;
use super::*;

/// Reference tolerance (absolute; outputs are averages of values in [-1, 1)).
const REF_TOL: f32 = 1e-5;

/// A paged cache filled with random keys/values, plus a shuffled free list of block ids.
struct Cache {
    k: Vec<f32>,
    v: Vec<f32>,
    block_size: usize,
    num_kv_heads: usize,
    head_dim: usize,
    free: Vec<u32>,
}

impl Cache {
    fn new(
        rng: &mut ChaCha8Rng,
        num_blocks: usize,
        block_size: usize,
        num_kv_heads: usize,
        head_dim: usize,
    ) -> Self {
        let n = num_blocks * block_size * num_kv_heads * head_dim;
        let mut free: Vec<u32> = (0..num_blocks as u32).collect();
        free.shuffle(rng);
        Cache {
            k: random(rng, n),
            v: random(rng, n),
            block_size,
            num_kv_heads,
            head_dim,
            free,
        }
    }

    fn kv(&self) -> PagedKv<'_> {
        PagedKv {
            k: &self.k,
            v: &self.v,
            block_size: self.block_size,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
        }
    }

    /// `shared` followed by fresh blocks up to `total` blocks.
    fn table(&mut self, shared: &[u32], total: usize) -> Vec<u32> {
        let mut t = shared.to_vec();
        while t.len() < total {
            t.push(self.free.pop().expect("test cache too small"));
        }
        t
    }

    /// Copies block `from` into a fresh block and returns its id.
    fn copy_block(&mut self, from: u32) -> u32 {
        let to = self.free.pop().expect("test cache too small");
        let len = self.block_size * self.num_kv_heads * self.head_dim;
        let (f, t) = (from as usize * len, to as usize * len);
        self.k.copy_within(f..f + len, t);
        self.v.copy_within(f..f + len, t);
        to
    }
}

fn random(rng: &mut ChaCha8Rng, n: usize) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect()
}

/// An owned sequence: query rows, block table, first position.
struct Seq {
    q: Vec<f32>,
    table: Vec<u32>,
    start: usize,
}

impl Seq {
    fn new(
        rng: &mut ChaCha8Rng,
        cache: &mut Cache,
        shared: &[u32],
        start: usize,
        len: usize,
        num_heads: usize,
    ) -> Self {
        let total = (start + len).div_ceil(cache.block_size).max(shared.len());
        let table = cache.table(shared, total);
        Seq {
            q: random(rng, len * num_heads * cache.head_dim),
            table,
            start,
        }
    }

    fn queries(&self) -> SeqQueries<'_> {
        SeqQueries {
            q: &self.q,
            block_table: &self.table,
            start_pos: self.start,
        }
    }
}

fn params(num_heads: usize, head_dim: usize) -> AttentionParams {
    AttentionParams {
        num_heads,
        scale: 1.0 / (head_dim as f32).sqrt(),
    }
}

fn out_len(seqs: &[SeqQueries<'_>], p: &AttentionParams, kv: &PagedKv<'_>) -> usize {
    seqs.iter().map(|s| s.q.len()).sum::<usize>() / (p.num_heads * kv.head_dim)
        * p.num_heads
        * kv.head_dim
}

fn run(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    p: &AttentionParams,
    sharing: Sharing,
) -> (Vec<f32>, AttentionStats) {
    let mut out = vec![f32::NAN; out_len(seqs, p, kv)];
    let stats = paged_attention_with(kv, seqs, p, &mut out, sharing).expect("valid call");
    (out, stats)
}

fn reference(kv: &PagedKv<'_>, seqs: &[SeqQueries<'_>], p: &AttentionParams) -> Vec<f32> {
    let mut out = vec![f32::NAN; out_len(seqs, p, kv)];
    attention_reference(kv, seqs, p, &mut out).expect("valid call");
    out
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}

fn assert_close(got: &[f32], want: &[f32], what: &str) {
    assert_eq!(got.len(), want.len());
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= REF_TOL,
            "{what}: element {i}: {g} vs reference {w}"
        );
    }
}

/// A mixed batch: prefill chunks from 0, mid-sequence and across the 128-token segment
/// boundary, a first decode token, and three branches over a shared prefix of `prefix_tokens`
/// (whole blocks) at decode and chunk steps.
fn mixed_batch(
    rng: &mut ChaCha8Rng,
    cache: &mut Cache,
    num_heads: usize,
    prefix_tokens: usize,
) -> Vec<Seq> {
    let prefix = cache.table(&[], prefix_tokens / cache.block_size);
    let mut seqs = vec![
        Seq::new(rng, cache, &[], 0, 40, num_heads),
        Seq::new(rng, cache, &[], 23, 17, num_heads),
        Seq::new(rng, cache, &[], 0, 1, num_heads),
        Seq::new(rng, cache, &[], 110, 40, num_heads),
    ];
    for (extra, len) in [(0, 1), (5, 3), (19, 1)] {
        seqs.push(Seq::new(
            rng,
            cache,
            &prefix,
            prefix_tokens + extra,
            len,
            num_heads,
        ));
    }
    seqs
}

#[test]
fn matches_reference_on_random_batches() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for (block_size, num_heads, num_kv_heads, head_dim) in [
        (1, 9, 3, 64),
        (4, 9, 3, 64),
        (16, 9, 3, 64),
        (4, 4, 4, 64),
        (16, 4, 4, 64),
        (4, 6, 2, 40),
    ] {
        let mut cache = Cache::new(&mut rng, 800, block_size, num_kv_heads, head_dim);
        let seqs = mixed_batch(&mut rng, &mut cache, num_heads, 144);
        let queries: Vec<_> = seqs.iter().map(Seq::queries).collect();
        let (kv, p) = (cache.kv(), params(num_heads, head_dim));
        let want = reference(&kv, &queries, &p);
        let what = format!(
            "block_size {block_size}, heads {num_heads}/{num_kv_heads}, head_dim {head_dim}"
        );
        let (got, stats) = run(&kv, &queries, &p, Sharing::Auto);
        assert!(
            stats.shared_block_reads_saved > 0,
            "{what}: the branches should share their prefix"
        );
        assert_close(&got, &want, &what);
        assert_close(&run(&kv, &queries, &p, Sharing::Off).0, &want, &what);
    }
}

/// Alone, every sequence is a one-member prefix cut by head; in the batch, the branches over
/// `prefix` (9 blocks) and `prefix[..8]` form one 11-member prefix that shares one whole segment,
/// so its second segment is streamed (every head, chunks of members) and its rows still get
/// the same bits.
#[test]
fn a_row_is_bitwise_the_same_alone_and_in_a_batch_of_16() {
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let (num_heads, head_dim) = (9, 64);
    let mut cache = Cache::new(&mut rng, 600, 16, 3, head_dim);
    let prefix = cache.table(&[], 9);
    let mut batch = Vec::new();
    for i in 0..16 {
        batch.push(match i % 3 {
            0 => Seq::new(&mut rng, &mut cache, &prefix, 150 + i, 1 + i % 4, num_heads),
            1 => Seq::new(&mut rng, &mut cache, &[], 3 * i, 24, num_heads),
            _ => Seq::new(
                &mut rng,
                &mut cache,
                &prefix[..8],
                130 + 3 * i,
                2,
                num_heads,
            ),
        });
    }
    let (kv, p) = (cache.kv(), params(num_heads, head_dim));
    let queries: Vec<_> = batch.iter().map(Seq::queries).collect();
    let (all, stats) = run(&kv, &queries, &p, Sharing::Auto);
    assert!(
        stats.shared_block_reads_saved > 0,
        "the batch must exercise the shared path"
    );
    let row = num_heads * head_dim;
    let mut offset = 0;
    for (i, q) in queries.iter().enumerate() {
        let n = q.q.len();
        let (alone, alone_stats) = run(&kv, std::slice::from_ref(q), &p, Sharing::Auto);
        assert_eq!(alone_stats.shared_block_reads_saved, 0);
        assert_eq!(
            bits(&all[offset..offset + n]),
            bits(&alone),
            "sequence {i} ({} rows)",
            n / row
        );
        offset += n;
    }
}

#[test]
fn shared_prefix_is_bitwise_equal_to_private_copies() {
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let (num_heads, head_dim, block_size) = (9, 64, 16);
    let mut cache = Cache::new(&mut rng, 400, block_size, 3, head_dim);
    let prefix = cache.table(&[], 3);
    let mut shared = Vec::new();
    for b in 0..16 {
        let (start, len) = (3 * block_size + 7 * b, if b % 4 == 0 { 5 } else { 1 });
        shared.push(Seq::new(
            &mut rng, &mut cache, &prefix, start, len, num_heads,
        ));
    }
    let private: Vec<Seq> = shared
        .iter()
        .map(|s| {
            let mut table: Vec<u32> = s.table[..3].iter().map(|&b| cache.copy_block(b)).collect();
            table.extend_from_slice(&s.table[3..]);
            Seq {
                q: s.q.clone(),
                table,
                start: s.start,
            }
        })
        .collect();
    let (kv, p) = (cache.kv(), params(num_heads, head_dim));
    let shared_q: Vec<_> = shared.iter().map(Seq::queries).collect();
    let private_q: Vec<_> = private.iter().map(Seq::queries).collect();
    let (a, sa) = run(&kv, &shared_q, &p, Sharing::Auto);
    let (b, sb) = run(&kv, &private_q, &p, Sharing::Auto);
    let (c, sc) = run(&kv, &shared_q, &p, Sharing::Off);
    assert_eq!(sa.shared_block_reads_saved, 15 * 3);
    assert_eq!(
        (sb.shared_block_reads_saved, sc.shared_block_reads_saved),
        (0, 0)
    );
    assert_eq!(bits(&a), bits(&b), "shared vs private copies");
    assert_eq!(bits(&a), bits(&c), "shared vs sharing off");
    assert_close(&a, &reference(&kv, &shared_q, &p), "shared vs reference");
}

#[test]
fn prefill_chunks_equal_token_by_token_bitwise() {
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let (num_heads, head_dim) = (9, 64);
    for (block_size, start) in [(4, 0), (16, 13), (16, 100), (1, 97)] {
        let mut cache = Cache::new(&mut rng, 200, block_size, 3, head_dim);
        let seq = Seq::new(&mut rng, &mut cache, &[], start, 40, num_heads);
        let (kv, p) = (cache.kv(), params(num_heads, head_dim));
        let row = num_heads * head_dim;
        let (chunk, _) = run(&kv, &[seq.queries()], &p, Sharing::Auto);
        let mut split = Vec::new();
        for (from, to) in [(0, 17), (17, 40)] {
            let q = SeqQueries {
                q: &seq.q[from * row..to * row],
                block_table: &seq.table,
                start_pos: start + from,
            };
            split.extend(run(&kv, &[q], &p, Sharing::Auto).0);
        }
        assert_eq!(
            bits(&chunk),
            bits(&split),
            "block_size {block_size}: 40 vs 17 + 23"
        );
        for i in 0..40 {
            let q = SeqQueries {
                q: &seq.q[i * row..][..row],
                block_table: &seq.table,
                start_pos: start + i,
            };
            let (one, _) = run(&kv, &[q], &p, Sharing::Auto);
            assert_eq!(
                bits(&chunk[i * row..][..row]),
                bits(&one),
                "block_size {block_size}, row {i}"
            );
        }
    }
}

#[test]
fn thread_count_does_not_change_bits() {
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut cache = Cache::new(&mut rng, 300, 4, 3, 64);
    let seqs = mixed_batch(&mut rng, &mut cache, 9, 144);
    let queries: Vec<_> = seqs.iter().map(Seq::queries).collect();
    let (kv, p) = (cache.kv(), params(9, 64));
    let outs: Vec<Vec<u32>> = [1, 2, 3]
        .iter()
        .map(|&n| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .expect("pool");
            bits(&pool.install(|| run(&kv, &queries, &p, Sharing::Auto)).0)
        })
        .collect();
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
}

#[test]
fn sixteen_branches_read_each_shared_prefix_block_once() {
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let (block_size, num_heads, head_dim) = (16, 9, 64);
    let mut cache = Cache::new(&mut rng, 100, block_size, 3, head_dim);
    let prefix = cache.table(&[], 32);
    let seqs: Vec<Seq> = (0..16)
        .map(|b| {
            Seq::new(
                &mut rng,
                &mut cache,
                &prefix,
                32 * block_size + b,
                1,
                num_heads,
            )
        })
        .collect();
    let queries: Vec<_> = seqs.iter().map(Seq::queries).collect();
    let (kv, p) = (cache.kv(), params(num_heads, head_dim));
    let (_, shared) = run(&kv, &queries, &p, Sharing::Auto);
    assert_eq!(
        shared,
        AttentionStats {
            kv_blocks_read: 32 + 16,
            shared_block_reads_saved: 15 * 32
        }
    );
    let (_, off) = run(&kv, &queries, &p, Sharing::Off);
    assert_eq!(
        off,
        AttentionStats {
            kv_blocks_read: 16 * 33,
            shared_block_reads_saved: 0
        }
    );
    // The split into segments is fixed by position, so one thread loads the same blocks.
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .expect("pool");
    assert_eq!(
        pool.install(|| run(&kv, &queries, &p, Sharing::Auto)).1,
        shared
    );
}

#[test]
fn empty_batches_and_empty_sequences_are_fine() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut cache = Cache::new(&mut rng, 10, 4, 1, 16);
    let seq = Seq::new(&mut rng, &mut cache, &[], 5, 0, 2);
    let (kv, p) = (cache.kv(), params(2, 16));
    assert_eq!(
        run(&kv, &[], &p, Sharing::Auto).1,
        AttentionStats::default()
    );
    assert_eq!(
        run(&kv, &[seq.queries()], &p, Sharing::Auto),
        (vec![], AttentionStats::default())
    );
}

#[test]
fn bad_arguments_are_errors_that_name_the_argument() {
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let mut cache = Cache::new(&mut rng, 8, 4, 2, 16);
    let seqs = [
        Seq::new(&mut rng, &mut cache, &[], 3, 2, 4),
        Seq::new(&mut rng, &mut cache, &[], 0, 1, 4),
    ];
    let (kv, p) = (cache.kv(), params(4, 16));
    let good: Vec<_> = seqs.iter().map(Seq::queries).collect();
    let row = 4 * 16;
    let check =
        |kv: &PagedKv<'_>, seqs: &[SeqQueries<'_>], p: &AttentionParams, out: usize, arg: &str| {
            let mut buf = vec![7.0f32; out];
            let err = paged_attention(kv, seqs, p, &mut buf).expect_err(arg);
            assert!(err.to_string().contains(arg), "{err} should name {arg}");
            assert!(
                buf.iter().all(|&x| x == 7.0),
                "{arg}: out was written before failing"
            );
            assert_eq!(
                attention_reference(kv, seqs, p, &mut buf).expect_err(arg),
                err
            );
            err
        };
    assert!(paged_attention(&kv, &good, &p, &mut vec![0.0; 3 * row]).is_ok());
    let short_q = &seqs[1].q[..row - 1];
    let mut bad = good.clone();
    bad[1].q = short_q;
    let e = check(&kv, &bad, &p, 3 * row, "`seqs[1].q`");
    assert_eq!(
        e,
        AttentionError::QueryLen {
            seq: 1,
            got: row - 1,
            row_len: row
        }
    );
    let mut bad = good.clone();
    bad[0].block_table = &seqs[0].table[..1];
    let e = check(&kv, &bad, &p, 3 * row, "`seqs[0].block_table`");
    assert_eq!(
        e,
        AttentionError::BlockTableTooShort {
            seq: 0,
            got: 1,
            needed: 2,
            end: 5
        }
    );
    let far = [8u32];
    let mut bad = good.clone();
    bad[1].block_table = &far;
    assert!(matches!(
        check(&kv, &bad, &p, 3 * row, "`seqs[1].block_table[0]`"),
        AttentionError::BlockOutOfRange { .. }
    ));
    let short_k = PagedKv {
        k: &cache.k[..cache.k.len() - 1],
        ..kv
    };
    check(&short_k, &good, &p, 3 * row, "`kv.k`");
    let short_v = PagedKv {
        v: &cache.v[..cache.v.len() - 4 * 2 * 16],
        ..kv
    };
    check(&short_v, &good, &p, 3 * row, "`kv.v`");
    check(&kv, &good, &p, 3 * row + 1, "`out`");
    check(
        &PagedKv { head_dim: 0, ..kv },
        &good,
        &p,
        3 * row,
        "`kv.head_dim`",
    );
    check(&kv, &good, &params(3, 16), 3 * row, "`params.num_heads`");
}

/// Prints the shared-vs-unshared decode timing JSON: `cargo test --release -- --ignored --nocapture bench`.
#[test]
#[ignore = "timing, not a check; run explicitly in release mode"]
fn bench_shared_prefix_decode() {
    let report = bench_report();
    println!("{report}");
    assert!(report.contains("\"bitwise_equal\": true"), "{report}");
}
