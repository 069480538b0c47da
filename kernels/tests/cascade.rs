//! `cascade_attention` (the CUDA attention kernels' CPU reference) against plain softmax over
//! gathered KV (`attention_reference`) and the engine's CPU path (`paged_attention`), on random
//! shapes with odd head dims, one-token prefixes, empty suffixes and block/split-boundary
//! lengths; and the softmax-state algebra it rests on.

use ponder_kernels::attention::{
    attention_reference, cascade_attention, paged_attention, AttentionError, AttentionParams,
    PagedKv, PrefixGroup, SeqQueries, SoftmaxState, SPLIT_TOKENS,
};
use rand::seq::SliceRandom;
use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::common::rng;

/// Absolute tolerance of attention outputs (averages of values in [-1, 1)).
pub(crate) const ATTN_TOL: f32 = 2e-5;
/// Tolerance of softmax-state merges against one pass (relative to 1).
const STATE_TOL: f32 = 2e-6;

/// A random paged cache with a shuffled free list, and sequences drawn from it.
pub(crate) struct Fixture {
    pub(crate) k: Vec<f32>,
    pub(crate) v: Vec<f32>,
    pub(crate) block_size: usize,
    pub(crate) num_kv_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) num_heads: usize,
    free: Vec<u32>,
    /// (q, block table, start_pos) per sequence.
    pub(crate) seqs: Vec<(Vec<f32>, Vec<u32>, usize)>,
}

impl Fixture {
    pub(crate) fn new(
        rng: &mut ChaCha8Rng,
        num_blocks: usize,
        block_size: usize,
        (num_heads, num_kv_heads, head_dim): (usize, usize, usize),
    ) -> Self {
        let n = num_blocks * block_size * num_kv_heads * head_dim;
        let mut free: Vec<u32> = (0..num_blocks as u32).collect();
        free.shuffle(rng);
        Fixture {
            k: (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect(),
            v: (0..n).map(|_| rng.random_range(-1.0f32..1.0)).collect(),
            block_size,
            num_kv_heads,
            head_dim,
            num_heads,
            free,
            seqs: Vec::new(),
        }
    }

    /// `n` fresh blocks.
    pub(crate) fn blocks(&mut self, n: usize) -> Vec<u32> {
        (0..n)
            .map(|_| self.free.pop().expect("fixture cache too small"))
            .collect()
    }

    /// Adds a sequence whose table starts with `shared`; returns its index.
    pub(crate) fn add(
        &mut self,
        rng: &mut ChaCha8Rng,
        shared: &[u32],
        start: usize,
        len: usize,
    ) -> usize {
        let total = (start + len).div_ceil(self.block_size).max(shared.len());
        let mut table = shared.to_vec();
        let extra = total - table.len();
        table.extend(self.blocks(extra));
        let q = (0..len * self.num_heads * self.head_dim)
            .map(|_| rng.random_range(-1.0f32..1.0))
            .collect();
        self.seqs.push((q, table, start));
        self.seqs.len() - 1
    }

    pub(crate) fn kv(&self) -> PagedKv<'_> {
        PagedKv {
            k: &self.k,
            v: &self.v,
            block_size: self.block_size,
            num_kv_heads: self.num_kv_heads,
            head_dim: self.head_dim,
        }
    }

    pub(crate) fn queries(&self) -> Vec<SeqQueries<'_>> {
        self.seqs
            .iter()
            .map(|(q, t, s)| SeqQueries {
                q,
                block_table: t,
                start_pos: *s,
            })
            .collect()
    }

    pub(crate) fn params(&self) -> AttentionParams {
        AttentionParams {
            num_heads: self.num_heads,
            scale: 1.0 / (self.head_dim as f32).sqrt(),
        }
    }

    pub(crate) fn out_len(&self) -> usize {
        self.seqs.iter().map(|s| s.0.len()).sum()
    }

    pub(crate) fn reference(&self) -> Vec<f32> {
        let mut out = vec![f32::NAN; self.out_len()];
        attention_reference(&self.kv(), &self.queries(), &self.params(), &mut out)
            .expect("valid call");
        out
    }

    pub(crate) fn cascade(&self, groups: &[PrefixGroup<'_>]) -> Result<Vec<f32>, AttentionError> {
        let mut out = vec![f32::NAN; self.out_len()];
        cascade_attention(
            &self.kv(),
            &self.queries(),
            groups,
            &self.params(),
            &mut out,
        )?;
        Ok(out)
    }
}

#[track_caller]
pub(crate) fn assert_close(got: &[f32], want: &[f32], tol: f32, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= tol, "{what}: element {i}: {g} vs {w}");
    }
}

/// Geometries: (num_heads, num_kv_heads, head_dim) with odd and GQA shapes, and block sizes.
pub(crate) const GEOMETRIES: [((usize, usize, usize), usize); 6] = [
    ((9, 3, 64), 16),
    ((4, 4, 17), 1),
    ((6, 2, 40), 3),
    ((8, 1, 72), 16),
    ((2, 2, 129), 5),
    ((12, 4, 8), 32),
];

/// A batch exercising the edge cases: groups with a one-token prefix, a prefix ending on a
/// block boundary and one across a split boundary, a member whose suffix is empty (it sees
/// exactly the prefix), members with prefill chunks, and loners.
pub(crate) fn edge_batch(
    rng: &mut ChaCha8Rng,
    geom: (usize, usize, usize),
    bs: usize,
) -> (Fixture, Vec<(Vec<usize>, usize)>) {
    let mut f = Fixture::new(rng, 1200, bs, geom);
    let mut groups = Vec::new();
    // One-token prefix: members share block 0 and start right after token 0.
    let p1 = f.blocks(1);
    let a = f.add(rng, &p1, 0, 1);
    let b = f.add(rng, &p1, 1, 3);
    groups.push((vec![a, b], 1));
    // Prefix of whole blocks; one member's suffix is empty (start_pos + 1 == prefix_len).
    let blocks = 40usize.div_ceil(bs);
    let pre = f.blocks(blocks);
    let plen = blocks * bs;
    let c = f.add(rng, &pre, plen - 1, 1);
    let d = f.add(rng, &pre, plen + bs, 2);
    let e = f.add(rng, &pre, plen, 5);
    groups.push((vec![c, d, e], plen));
    // A prefix past the first split, ending mid-block (the tail block shared, not copied).
    let plen = SPLIT_TOKENS + 7;
    let pre = f.blocks(plen.div_ceil(bs));
    let g = f.add(rng, &pre, plen - 1, 2);
    let h = f.add(rng, &pre, SPLIT_TOKENS * 2 - 1, 1);
    groups.push((vec![g, h], plen));
    // Loners: a prefill chunk across a split boundary, a first token, a block-boundary decode.
    f.add(rng, &[], SPLIT_TOKENS - 3, 6);
    f.add(rng, &[], 0, 1);
    f.add(rng, &[], 3 * bs - 1, 1);
    (f, groups)
}

pub(crate) fn as_groups(groups: &[(Vec<usize>, usize)]) -> Vec<PrefixGroup<'_>> {
    groups
        .iter()
        .map(|(m, p)| PrefixGroup {
            members: m,
            prefix_len: *p,
        })
        .collect()
}

#[test]
fn cascade_matches_plain_softmax_over_gathered_kv() {
    let mut rng = rng(40);
    for (geom, bs) in GEOMETRIES {
        let (f, groups) = edge_batch(&mut rng, geom, bs);
        let want = f.reference();
        let what = format!("heads {geom:?}, block_size {bs}");
        let got = f.cascade(&as_groups(&groups)).expect("valid groups");
        assert_close(&got, &want, ATTN_TOL, &format!("{what}, grouped"));
        let alone = f.cascade(&[]).expect("no groups");
        assert_close(&alone, &want, ATTN_TOL, &format!("{what}, ungrouped"));
        let mut engine = vec![f32::NAN; f.out_len()];
        paged_attention(&f.kv(), &f.queries(), &f.params(), &mut engine).expect("valid call");
        assert_close(&engine, &got, ATTN_TOL, &format!("{what}, engine CPU path"));
    }
}

#[test]
fn random_prefix_lengths_and_member_counts() {
    let mut rng = rng(41);
    for round in 0..12 {
        let bs = [1usize, 2, 7, 16][round % 4];
        let hd = [5usize, 33, 64, 96][(round / 4) % 4];
        let mut f = Fixture::new(&mut rng, 900, bs, (6, 3, hd));
        let plen = rng.random_range(1..600usize);
        let pre = f.blocks(plen.div_ceil(bs));
        let members: Vec<usize> = (0..rng.random_range(1..6usize))
            .map(|_| {
                let start = plen - 1 + rng.random_range(0..40usize);
                let len = rng.random_range(0..4usize);
                f.add(&mut rng, &pre, start, len)
            })
            .collect();
        let groups = [(members, plen)];
        let got = f.cascade(&as_groups(&groups)).expect("valid");
        assert_close(&got, &f.reference(), ATTN_TOL, &format!("round {round}"));
    }
}

fn random_state(rng: &mut ChaCha8Rng, n: usize, hd: usize) -> (Vec<f32>, Vec<Vec<f32>>) {
    let scores = (0..n).map(|_| rng.random_range(-6.0f32..6.0)).collect();
    let values = (0..n)
        .map(|_| (0..hd).map(|_| rng.random_range(-1.0f32..1.0)).collect())
        .collect();
    (scores, values)
}

fn fold(scores: &[f32], values: &[Vec<f32>], hd: usize) -> SoftmaxState {
    let mut s = SoftmaxState::empty(hd);
    for (&x, v) in scores.iter().zip(values) {
        s.push(x, v).expect("same head_dim");
    }
    s
}

#[test]
fn prefix_merged_with_suffix_equals_attention_over_the_concatenation() {
    let mut rng = rng(42);
    for hd in [1usize, 7, 64] {
        let (scores, values) = random_state(&mut rng, 300, hd);
        let whole = fold(&scores, &values, hd);
        for cut in [0usize, 1, 2, 127, 299, 300] {
            let mut merged = fold(&scores[..cut], &values[..cut], hd);
            merged
                .merge(&fold(&scores[cut..], &values[cut..], hd))
                .expect("same head_dim");
            let (mut a, mut b) = (vec![0.0; hd], vec![0.0; hd]);
            whole.write_output(&mut a).expect("hd");
            merged.write_output(&mut b).expect("hd");
            assert_close(&b, &a, STATE_TOL, &format!("hd {hd}, cut {cut}"));
            assert!((merged.lse() - whole.lse()).abs() <= STATE_TOL * whole.lse().abs().max(1.0));
        }
    }
}

#[test]
fn the_empty_state_is_an_exact_identity() {
    let mut rng = rng(43);
    let (scores, values) = random_state(&mut rng, 20, 9);
    let s = fold(&scores, &values, 9);
    let mut left = SoftmaxState::empty(9);
    left.merge(&s).expect("hd");
    let mut right = s.clone();
    right.merge(&SoftmaxState::empty(9)).expect("hd");
    assert_eq!(left, s);
    assert_eq!(right, s);
    let mut both = SoftmaxState::empty(9);
    both.merge(&SoftmaxState::empty(9)).expect("hd");
    assert!(both.is_empty() && both.sum() == 0.0 && both.acc().iter().all(|&a| a == 0.0));
    assert_eq!(both.lse(), f32::NEG_INFINITY);
    assert!(matches!(
        left.merge(&SoftmaxState::empty(8)),
        Err(AttentionError::StateHeadDim {
            expected: 9,
            got: 8
        })
    ));
}

#[test]
fn bad_groups_are_typed_errors() {
    let mut rng = rng(44);
    let mut f = Fixture::new(&mut rng, 64, 4, (4, 2, 8));
    let pre = f.blocks(2);
    let a = f.add(&mut rng, &pre, 8, 1);
    let b = f.add(&mut rng, &pre, 9, 2);
    let other = f.blocks(2);
    let c = f.add(&mut rng, &other, 8, 1);
    let err = |members: &[usize], prefix_len| {
        f.cascade(&[PrefixGroup {
            members,
            prefix_len,
        }])
        .expect_err("must be rejected")
    };
    assert_eq!(err(&[], 4), AttentionError::EmptyGroup { group: 0 });
    assert_eq!(err(&[a, b], 0), AttentionError::EmptyPrefix { group: 0 });
    assert!(matches!(
        err(&[a, 9], 4),
        AttentionError::GroupMemberOutOfRange { member: 9, .. }
    ));
    assert_eq!(
        err(&[a, a], 4),
        AttentionError::DuplicateMember { group: 0, seq: a }
    );
    assert!(matches!(
        err(&[a, b], 10),
        AttentionError::PrefixNotVisible { seq, prefix_len: 10, start_pos: 8, .. } if seq == a
    ));
    assert!(matches!(
        err(&[a, c], 8),
        AttentionError::PrefixMismatch { seq, index: 0, .. } if seq == c
    ));
    let two = f.cascade(&[
        PrefixGroup {
            members: &[a],
            prefix_len: 4,
        },
        PrefixGroup {
            members: &[b, a],
            prefix_len: 4,
        },
    ]);
    assert_eq!(
        two,
        Err(AttentionError::DuplicateMember { group: 1, seq: a })
    );
    // A group whose shared prefix is valid but short of the tables' common blocks is fine.
    let ok = f.cascade(&[PrefixGroup {
        members: &[a, b],
        prefix_len: 5,
    }]);
    assert_close(&ok.expect("valid"), &f.reference(), ATTN_TOL, "prefix of 5");
}
