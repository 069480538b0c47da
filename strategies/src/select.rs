//! Choosing among candidates: by vote over equivalent answers (optionally weighted by score) or
//! by the single best score. Shared by every strategy's final step and by the driver after an
//! interruption.

use ponder_verifiers::{majority_vote, weighted_vote};

use crate::outcome::{Candidate, Selection};

/// The candidate with the highest score (ties: earlier), or the first one if none is scored.
pub fn select_best_score(candidates: &[Candidate]) -> Selection {
    let mut best: Option<(usize, f32)> = None;
    for (i, c) in candidates.iter().enumerate() {
        let s = c.score.unwrap_or(f32::NEG_INFINITY);
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    match best {
        Some((i, _)) => Selection {
            answer: candidates[i].answer.clone(),
            candidate: Some(i),
            support: None,
        },
        None => Selection::default(),
    }
}

/// Majority vote over the candidates' answers (grouped by math equivalence); with `weighted`,
/// each vote counts its score (weighted best-of-N). Only solutions the model finished vote
/// when there are any (a solution cut off by its token cap has no real final answer; its
/// "answer" is whatever number it reached). The representative shown is the group's
/// best-scored member. Candidates without an answer do not vote; if none has one, falls back
/// to the best score.
pub fn select_by_vote(candidates: &[Candidate], weighted: bool) -> Selection {
    if candidates.iter().any(|c| c.finished) && candidates.iter().any(|c| !c.finished) {
        return select_among(candidates, |c| c.finished, |pool| vote(pool, weighted));
    }
    vote(candidates, weighted)
}

fn vote(candidates: &[Candidate], weighted: bool) -> Selection {
    let voters: Vec<(usize, &str, f64)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            c.answer
                .as_deref()
                .map(|a| (i, a, c.score.map_or(1.0, |s| s.max(0.0) as f64)))
        })
        .collect();
    let vote = if weighted {
        weighted_vote(voters.iter().map(|(_, a, w)| (*a, *w)))
    } else {
        majority_vote(voters.iter().map(|(_, a, _)| *a))
    };
    let Some(vote) = vote else {
        return select_best_score(candidates);
    };
    let members: Vec<usize> = voters
        .iter()
        .filter(|(_, a, _)| ponder_verifiers::equivalent(a, &vote.answer))
        .map(|(i, _, _)| *i)
        .collect();
    let shown = members.iter().copied().max_by(|a, b| {
        let (sa, sb) = (
            candidates[*a].score.unwrap_or(f32::MIN),
            candidates[*b].score.unwrap_or(f32::MIN),
        );
        sa.total_cmp(&sb).then(b.cmp(a))
    });
    let support = if vote.total > 0.0 {
        Some(vote.support / vote.total)
    } else {
        None
    };
    Selection {
        answer: Some(vote.answer),
        candidate: shown,
        support,
    }
}

/// Applies `choose` to the candidates `keep` accepts (to all of them if it accepts none) and
/// maps the chosen index back into `candidates`.
pub fn select_among(
    candidates: &[Candidate],
    keep: impl Fn(&Candidate) -> bool,
    choose: impl Fn(&[Candidate]) -> Selection,
) -> Selection {
    let kept: Vec<Candidate> = candidates.iter().filter(|c| keep(c)).cloned().collect();
    let pool = if kept.is_empty() {
        candidates.to_vec()
    } else {
        kept
    };
    let mut sel = choose(&pool);
    sel.candidate = sel
        .candidate
        .and_then(|i| pool.get(i))
        .and_then(|c| candidates.iter().position(|x| x.node == c.node));
    sel
}
