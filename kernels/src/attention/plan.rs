//! Grouping of a batch into shared prefixes for the cascade schedule: sequences whose block
//! tables begin with the same block ids form one [`SharedPrefix`] that loads those shared
//! blocks once for all of its query rows (the two-level cascade of FlashInfer, Ye et al. 2024,
//! and Hydragen, Juravsky et al. 2024: one shared prefix, then each sequence's own suffix).
//!
//! Pure bookkeeping, no floats. Invariants of the returned plan:
//! - every sequence with at least one query row is in exactly one shared prefix; sequences
//!   with none are in none;
//! - a prefix's `shared` blocks are the same ids, in the same order, at the start of every
//!   member's block table, and every query row of every member sees all of their tokens
//!   (`shared * block_size <= start + 1` for each member), so a shared block is always
//!   attended in full: the per-block partials are exactly those of an unshared walk;
//! - `shared == 0` exactly for single-member prefixes.
//!
//! Grouping only decides which blocks are loaded together; it never changes any row's
//! numerics (see `block`), so a heuristic choice here can cost speed but not bits.

use std::collections::BTreeMap;

use super::shape::SeqArgs;
use super::shape::SeqShape;

/// Whether `paged_attention` may group sequences that share leading blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sharing {
    /// Group sequences whose block tables share leading, fully visible blocks.
    Auto,
    /// Every sequence walks its own blocks (the baseline the bench compares against).
    Off,
}

/// Sequences processed together; `shared` leading blocks are loaded once for all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SharedPrefix {
    /// Indices into `seqs`, ascending.
    pub(crate) members: Vec<usize>,
    /// Leading blocks common to all members and fully visible to all their query rows.
    pub(crate) shared: usize,
}

/// Groups `seqs` into shared prefixes: a one-level cascade keyed by the first block id.
pub(crate) fn plan_shared_prefixes(
    seqs: &[impl SeqArgs],
    shapes: &[SeqShape],
    block_size: usize,
    sharing: Sharing,
) -> Vec<SharedPrefix> {
    let single = |i: usize| SharedPrefix {
        members: vec![i],
        shared: 0,
    };
    let active = (0..seqs.len()).filter(|&i| shapes[i].len > 0);
    if sharing == Sharing::Off {
        return active.map(single).collect();
    }
    // Blocks every query row of sequence i sees in full: its first row is at `start`.
    let full = |i: usize| ((shapes[i].start + 1) / block_size).min(shapes[i].blocks);
    let mut by_first: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut prefixes = Vec::new();
    for i in active {
        match seqs[i].block_table().first() {
            Some(&b) if full(i) > 0 => by_first.entry(b).or_default().push(i),
            _ => prefixes.push(single(i)),
        }
    }
    for members in by_first.into_values() {
        let lead = seqs[members[0]].block_table();
        let shared = members.iter().fold(usize::MAX, |acc, &i| {
            let table = seqs[i].block_table();
            let common = lead.iter().zip(table).take_while(|(a, b)| a == b).count();
            acc.min(common).min(full(i))
        });
        if members.len() > 1 && shared > 0 {
            prefixes.push(SharedPrefix { members, shared });
        } else {
            prefixes.extend(members.into_iter().map(single));
        }
    }
    prefixes.sort_by_key(|u| u.members[0]);
    prefixes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::SeqQueries;

    fn seq(table: &[u32], start: usize, len: usize) -> (SeqQueries<'_>, SeqShape) {
        let blocks = (start + len).div_ceil(4);
        let q: &[f32] = &[];
        (
            SeqQueries {
                q,
                block_table: table,
                start_pos: start,
            },
            SeqShape {
                len,
                start,
                row_offset: 0,
                blocks,
            },
        )
    }

    fn plan(items: &[(SeqQueries<'_>, SeqShape)], sharing: Sharing) -> Vec<SharedPrefix> {
        let seqs: Vec<_> = items.iter().map(|(s, _)| *s).collect();
        let shapes: Vec<_> = items.iter().map(|(_, s)| *s).collect();
        plan_shared_prefixes(&seqs, &shapes, 4, sharing)
    }

    #[test]
    fn branches_share_their_common_visible_prefix() {
        let (a, b, c) = ([7u32, 8, 9, 1], [7u32, 8, 9, 2], [7u32, 8, 3, 4]);
        let items = [seq(&a, 14, 1), seq(&b, 13, 2), seq(&c, 12, 1)];
        assert_eq!(
            plan(&items, Sharing::Auto),
            vec![SharedPrefix {
                members: vec![0, 1, 2],
                shared: 2
            }]
        );
        let off = plan(&items, Sharing::Off);
        assert_eq!(
            off.iter().map(|u| u.shared).collect::<Vec<_>>(),
            vec![0, 0, 0]
        );
    }

    #[test]
    fn shared_run_is_capped_by_the_earliest_query_position() {
        let (a, b) = ([7u32, 8, 9, 1], [7u32, 8, 9, 2]);
        // Row at position 6 sees block 0 fully (0..4) but only 3 tokens of block 1.
        let items = [seq(&a, 14, 1), seq(&b, 6, 8)];
        assert_eq!(
            plan(&items, Sharing::Auto),
            vec![SharedPrefix {
                members: vec![0, 1],
                shared: 1
            }]
        );
        // Position 7 sees block 1 in full (4..8).
        let items = [seq(&a, 14, 1), seq(&b, 7, 1)];
        assert_eq!(
            plan(&items, Sharing::Auto),
            vec![SharedPrefix {
                members: vec![0, 1],
                shared: 2
            }]
        );
    }

    #[test]
    fn unrelated_lone_and_empty_sequences_stay_single_or_absent() {
        let (a, b, c) = ([1u32, 2], [3u32, 4], [1u32, 5]);
        let items = [seq(&a, 5, 1), seq(&b, 5, 1), seq(&c, 2, 1), seq(&a, 5, 0)];
        let prefixes = plan(&items, Sharing::Auto);
        // c (position 2) sees no full block, so a has nobody to share with.
        let members: Vec<_> = prefixes
            .iter()
            .map(|u| (u.members.clone(), u.shared))
            .collect();
        assert_eq!(members, vec![(vec![0], 0), (vec![1], 0), (vec![2], 0)]);
    }
}
