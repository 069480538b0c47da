//! A timing report for the case the cascade exists for: one decode step of 16 branches that
//! share a 512-token prompt prefix (SmolLM2-135M geometry: 9 query heads, 3 key/value heads,
//! head_dim 64; block_size 16), each branch with 16 tokens of its own plus the new one.
//!
//! Compares, in the same process and on the same data: the shared-prefix schedule, the same
//! blocks with sharing forced off (every branch re-reads the prefix, from cache), and branches
//! holding private copies of the prefix in distinct blocks (re-reads from memory); each with
//! the default rayon pool and with one thread. Returns JSON (the ignored test
//! `bench_shared_prefix_decode` prints it) and checks that all modes produce the same bits, as
//! the numerics contract requires.

use std::time::Instant;

use super::plan::Sharing;
use super::{paged_attention_with, AttentionParams, AttentionStats, PagedKv, SeqQueries};

const BRANCHES: usize = 16;
const PREFIX_BLOCKS: usize = 32;
const OWN_BLOCKS: usize = 2;
const BLOCK_SIZE: usize = 16;
const NUM_HEADS: usize = 9;
const NUM_KV_HEADS: usize = 3;
const HEAD_DIM: usize = 64;
const ITERS: usize = 200;

/// Deterministic values in [-1, 1) (splitmix64), so the bench needs no RNG dependency.
fn fill(buf: &mut [f32], mut seed: u64) {
    for x in buf.iter_mut() {
        seed = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        *x = (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
    }
}

/// Median and minimum microseconds of `ITERS` calls, the stats and output of the last one.
struct Timing {
    median_us: f64,
    min_us: f64,
    stats: AttentionStats,
    out: Vec<f32>,
}

fn time(
    kv: &PagedKv<'_>,
    seqs: &[SeqQueries<'_>],
    params: &AttentionParams,
    sharing: Sharing,
) -> Timing {
    let mut out = vec![0f32; BRANCHES * NUM_HEADS * HEAD_DIM];
    let mut stats = AttentionStats::default();
    let mut us = Vec::with_capacity(ITERS);
    for _ in 0..ITERS / 10 {
        if let Ok(s) = paged_attention_with(kv, seqs, params, &mut out, sharing) {
            stats = s;
        }
    }
    for _ in 0..ITERS {
        let t0 = Instant::now();
        if let Ok(s) = paged_attention_with(kv, seqs, params, &mut out, sharing) {
            stats = s;
        }
        us.push(t0.elapsed().as_secs_f64() * 1e6);
    }
    us.sort_by(f64::total_cmp);
    Timing {
        median_us: us[ITERS / 2],
        min_us: us[0],
        stats,
        out,
    }
}

/// One decode row per branch: branch `b` gets query row `b` and table `tables[b]`.
fn seqs<'a>(q: &'a [f32], tables: &'a [Vec<u32>], start_pos: usize) -> Vec<SeqQueries<'a>> {
    let rows = q.chunks_exact(NUM_HEADS * HEAD_DIM);
    tables
        .iter()
        .zip(rows)
        .map(|(t, q)| SeqQueries {
            q,
            block_table: t,
            start_pos,
        })
        .collect()
}

fn json(name: &str, t: &Timing) -> String {
    format!(
        "\"{name}\": {{\"median_us\": {:.1}, \"min_us\": {:.1}, \"kv_blocks_read\": {}, \"shared_block_reads_saved\": {}}}",
        t.median_us, t.min_us, t.stats.kv_blocks_read, t.stats.shared_block_reads_saved
    )
}

/// Times one 16-branch decode step over a 512-token shared prefix (see the module docs) and
/// returns a JSON object with median/min microseconds per call for each mode.
pub fn bench_report() -> String {
    let block_len = BLOCK_SIZE * NUM_KV_HEADS * HEAD_DIM;
    // Blocks: the shared prefix, each branch's own blocks, then each branch's prefix copy.
    let own_base = PREFIX_BLOCKS;
    let copy_base = own_base + BRANCHES * OWN_BLOCKS;
    let num_blocks = copy_base + BRANCHES * PREFIX_BLOCKS;
    let (mut k, mut v) = (
        vec![0f32; num_blocks * block_len],
        vec![0f32; num_blocks * block_len],
    );
    fill(&mut k[..copy_base * block_len], 1);
    fill(&mut v[..copy_base * block_len], 2);
    for b in 0..BRANCHES {
        let dst = (copy_base + b * PREFIX_BLOCKS) * block_len;
        k.copy_within(..PREFIX_BLOCKS * block_len, dst);
        v.copy_within(..PREFIX_BLOCKS * block_len, dst);
    }
    let mut q = vec![0f32; BRANCHES * NUM_HEADS * HEAD_DIM];
    fill(&mut q, 3);
    let own = |b: usize| (0..OWN_BLOCKS).map(move |j| (own_base + b * OWN_BLOCKS + j) as u32);
    let shared: Vec<Vec<u32>> = (0..BRANCHES)
        .map(|b| (0..PREFIX_BLOCKS as u32).chain(own(b)).collect())
        .collect();
    let private: Vec<Vec<u32>> = (0..BRANCHES)
        .map(|b| {
            (0..PREFIX_BLOCKS)
                .map(|j| (copy_base + b * PREFIX_BLOCKS + j) as u32)
                .chain(own(b))
                .collect()
        })
        .collect();
    // The decode token is the first slot of the branch's second own block.
    let start_pos = (PREFIX_BLOCKS + 1) * BLOCK_SIZE;
    let kv = PagedKv {
        k: &k,
        v: &v,
        block_size: BLOCK_SIZE,
        num_kv_heads: NUM_KV_HEADS,
        head_dim: HEAD_DIM,
    };
    let params = AttentionParams {
        num_heads: NUM_HEADS,
        scale: 1.0 / (HEAD_DIM as f32).sqrt(),
    };
    let (shared_seqs, private_seqs) = (seqs(&q, &shared, start_pos), seqs(&q, &private, start_pos));
    let run_all = || {
        [
            ("shared", time(&kv, &shared_seqs, &params, Sharing::Auto)),
            (
                "unshared_same_blocks",
                time(&kv, &shared_seqs, &params, Sharing::Off),
            ),
            (
                "unshared_private_copies",
                time(&kv, &private_seqs, &params, Sharing::Auto),
            ),
        ]
    };
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build();
    let mut sections = vec![("threads_default", rayon::current_num_threads(), run_all())];
    if let Ok(pool) = pool {
        sections.push(("threads_1", 1, pool.install(run_all)));
    }
    let reference = &sections[0].2[0].1.out;
    let bitwise_equal = sections
        .iter()
        .flat_map(|s| &s.2)
        .all(|(_, t)| bits(&t.out) == bits(reference));
    let body: Vec<String> = sections
        .iter()
        .map(|(name, threads, runs)| {
            let same = runs[1].1.median_us / runs[0].1.median_us;
            let private = runs[2].1.median_us / runs[0].1.median_us;
            let modes: Vec<String> = runs.iter().map(|(n, t)| json(n, t)).collect();
            format!(
                "\"{name}\": {{\"threads\": {threads}, {}, \"speedup_vs_same_blocks\": {same:.2}, \"speedup_vs_private_copies\": {private:.2}}}",
                modes.join(", ")
            )
        })
        .collect();
    format!(
        "{{\"case\": \"decode, {BRANCHES} branches x {} shared prefix tokens + {} own, heads {NUM_HEADS}/{NUM_KV_HEADS}, head_dim {HEAD_DIM}, block_size {BLOCK_SIZE}\", \"iters\": {ITERS}, \"bitwise_equal\": {bitwise_equal}, {}}}",
        PREFIX_BLOCKS * BLOCK_SIZE,
        BLOCK_SIZE + 1,
        body.join(", ")
    )
}

fn bits(x: &[f32]) -> Vec<u32> {
    x.iter().map(|v| v.to_bits()).collect()
}
