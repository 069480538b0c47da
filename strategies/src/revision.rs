//! Sequential revision: chains of attempts, each written with the chain's previous attempts in
//! view, several chains in parallel, the answer chosen across all of them.
//!
//! **Method** (Snell et al. 2024, "Scaling LLM Test-Time Compute Optimally can be More Effective
//! than Scaling Model Parameters", §6): a chain begins with an attempt sampled from the question;
//! each later attempt is sampled from a prompt that shows the question and the chain's last
//! `context_attempts` attempts (the paper shows up to four), oldest first, and asks for a
//! corrected solution. `chains` chains of `attempts` attempts run side by side — all chains'
//! k-th attempts in one engine call — so `attempts : chains` is the sequential/parallel ratio
//! the paper varies (its compute-optimal policy picks it per difficulty; the calibration
//! measures more than one for `auto`). The paper fine-tunes a revision model; here the model is
//! prompted to revise, so a model that cannot read its own mistakes gains less.
//!
//! **Selection** (`select`): `vote` (default) — majority over every attempt of every chain,
//! answers grouped by equivalence (the paper's majority across and within chains); `last` — a
//! vote over each chain's final attempt; `weighted` — the verifier's scores summed per answer
//! over every attempt (the paper's best-of-N weighted selection); `best` — the best-scored
//! attempt. `weighted` and `best` score every attempt (`score_by`, cut into steps at
//! `step_delimiter` for a PRM); `vote` and `last` call no verifier.
//!
//! **Parameters** ([`RevisionParams`]): `chains` (2), `attempts` (4), `context_attempts` (4),
//! `max_tokens` per attempt (512), `select`, `score_by` (`prm_last`), `step_delimiter`,
//! `decoding`, `force_answer` (true: an attempt that marks no answer is asked for one).
//!
//! **Budget.** The question is prefilled once and stays open, so a revision prompt's opening is
//! served from it; what a revision prefills is the shown attempts and the request around them.
//! Before each round, the attempts of that round are capped so that every later round still
//! fits: the budget left, less this round's prefill and an estimate of the later rounds'
//! (each shows at most `context_attempts` attempts of the cap, plus [`REVISION_OVERHEAD`]
//! tokens), is divided over the attempts still to come — shares a round did not spend go to the
//! next. A budget too small for every round at a quarter of `max_tokens` per attempt plans fewer
//! rounds (the chains end early; attempts much shorter than asked for are worth less than fewer
//! whole ones), and the answer is chosen from the attempts made; a budget that cannot cover the
//! first round is refused naming `budget_tokens`.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::context::{Branch, Context};
use crate::error::{Result, StrategyError};
use crate::generator::Prompt;
use crate::outcome::{Candidate, Selection};
use crate::params::{positive, Decoding, ScoreBy};
use crate::select::{select_among, select_best_score, select_by_vote};
use crate::strategy::Strategy;
use crate::tree::{NodeId, SearchTree};

/// Tokens a revision prompt adds around the attempts it shows (the request and the separators),
/// as budgeted for rounds not yet opened.
pub const REVISION_OVERHEAD: u64 = 64;

/// How the answer is chosen among the attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RevisionSelect {
    /// Majority over every attempt of every chain.
    Vote,
    /// Majority over each chain's final attempt.
    Last,
    /// Verifier scores summed per answer over every attempt.
    Weighted,
    /// The best-scored attempt.
    Best,
}

/// Parameters of `revision`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RevisionParams {
    /// Chains run in parallel.
    pub chains: usize,
    /// Attempts per chain: the first and its revisions.
    pub attempts: usize,
    /// How many of the chain's latest attempts a revision is shown.
    pub context_attempts: usize,
    /// Most tokens per attempt.
    pub max_tokens: usize,
    /// How the answer is chosen.
    pub select: RevisionSelect,
    /// What `weighted` and `best` rank attempts by.
    pub score_by: ScoreBy,
    /// Where an attempt is cut into the steps a PRM scores.
    pub step_delimiter: String,
    /// Sampling.
    pub decoding: Decoding,
    /// Ask an attempt that marks no final answer for one (a short greedy probe).
    pub force_answer: bool,
}

impl Default for RevisionParams {
    fn default() -> Self {
        Self {
            chains: 2,
            attempts: 4,
            context_attempts: 4,
            max_tokens: 512,
            select: RevisionSelect::Vote,
            score_by: ScoreBy::PrmLast,
            step_delimiter: "\n\n".into(),
            decoding: Decoding::default(),
            force_answer: true,
        }
    }
}

/// Chains of revisions, answered across the chains.
#[derive(Debug, Clone)]
pub struct Revision {
    params: RevisionParams,
}

const NAME: &str = "revision";

/// One attempt of a chain, as later revisions show it.
#[derive(Debug, Clone)]
struct Attempt {
    node: NodeId,
    text: String,
}

impl Revision {
    /// Validates `params`: at least one chain, one attempt, one token per attempt, and one
    /// attempt shown to a revision when there are revisions.
    pub fn new(params: RevisionParams) -> Result<Self> {
        positive(NAME, "chains", params.chains)?;
        positive(NAME, "attempts", params.attempts)?;
        positive(NAME, "max_tokens", params.max_tokens)?;
        if params.attempts > 1 {
            positive(NAME, "context_attempts", params.context_attempts)?;
        }
        params.decoding.validate(NAME)?;
        Ok(Self { params })
    }

    /// How many attempts revision `round` (0: the first attempt) shows.
    fn shown(&self, round: usize) -> usize {
        round.min(self.params.context_attempts)
    }

    /// The prompt for the next attempt of a chain whose latest attempts are `shown`.
    fn revision_prompt(&self, ctx: &Context, shown: &[Attempt]) -> Prompt {
        let mut user = format!(
            "{}\n\nBelow are earlier attempts at this problem, oldest first. They may contain \
             mistakes.\n",
            ctx.problem().question
        );
        for (i, a) in shown.iter().enumerate() {
            user.push_str(&format!("\n--- attempt {} ---\n{}\n", i + 1, a.text.trim()));
        }
        user.push_str(
            "--- end of attempts ---\n\nCheck them for mistakes, then write a corrected solution \
             step by step, with the final answer in \\boxed{}.",
        );
        Prompt {
            system: ctx.problem().system.clone(),
            history: ctx.problem().history.clone(),
            user,
        }
    }

    /// The tokens each attempt of `round` may generate if the chains end after `rounds` rounds:
    /// the budget left, less `prefill` (this round's) and the estimated prefill of the later
    /// rounds, over the attempts still to come.
    fn cap_for(&self, ctx: &Context, round: usize, rounds: usize, prefill: u64) -> usize {
        let p = &self.params;
        let chains = p.chains as u64;
        let later = round + 1..rounds;
        let shown: u64 = later.clone().map(|r| self.shown(r) as u64).sum();
        let reserved = prefill + chains * REVISION_OVERHEAD * later.len() as u64;
        let per_token = chains * ((rounds - round) as u64 + shown);
        let share = ctx.available().saturating_sub(reserved) / per_token.max(1);
        (p.max_tokens as u64).min(share) as usize
    }

    /// How many rounds the chains will run, and the cap of this round's attempts: every round
    /// asked for while each attempt still gets at least a quarter of `max_tokens`, else fewer
    /// (attempts much shorter than asked for are worth less than fewer whole ones). `None`
    /// when not even this round has a share.
    fn plan(&self, ctx: &Context, round: usize, prefill: u64) -> Option<(usize, usize)> {
        let floor = (self.params.max_tokens / 4).max(1);
        for rounds in (round + 1..=self.params.attempts).rev() {
            let cap = self.cap_for(ctx, round, rounds, prefill);
            if cap >= floor || (rounds == round + 1 && cap > 0) {
                return Some((rounds, cap));
            }
        }
        None
    }

    /// Generates one attempt on each of `branches` (all in one call, capped by [`Self::plan`]),
    /// scores them if the selection needs it and records them as candidates. Returns them with
    /// the number of rounds the plan now has; `None` when the budget has no share left.
    async fn round(
        &self,
        ctx: &Context,
        round: usize,
        branches: Vec<Branch>,
    ) -> Result<Option<(Vec<Attempt>, usize)>> {
        let p = &self.params;
        let prefill = ctx.prefill_bound(&branches)?;
        let Some((rounds, cap)) = self.plan(ctx, round, prefill) else {
            return Ok(None);
        };
        let requests = branches
            .into_iter()
            .enumerate()
            .map(|(c, b)| (b, c as u64))
            .collect();
        let done = ctx.extend(requests, &p.decoding.whole(cap)).await?;
        let scores = match p.select {
            RevisionSelect::Weighted | RevisionSelect::Best => Some(
                ctx.score_split(&done, p.score_by, &p.step_delimiter)
                    .await?,
            ),
            RevisionSelect::Vote | RevisionSelect::Last => None,
        };
        let mut made = Vec::with_capacity(done.len());
        for (c, branch) in done.iter().enumerate() {
            let score = scores.as_ref().and_then(|s| s.get(c).copied());
            if p.force_answer {
                ctx.add_candidate_forced(branch, score).await;
            } else {
                ctx.add_candidate(branch, score);
            }
            let text = ctx.with_tree(|t| {
                t.note(branch.node, "chain", c);
                t.note(branch.node, "attempt", round);
                t.text(branch.node)
            });
            made.push(Attempt {
                node: branch.node,
                text,
            });
            ctx.release(branch);
        }
        Ok(Some((made, rounds)))
    }

    /// Chooses among `candidates`; `last` holds each chain's final attempt.
    fn choose(&self, candidates: &[Candidate], last: &[NodeId]) -> Selection {
        match self.params.select {
            RevisionSelect::Vote => select_by_vote(candidates, false),
            RevisionSelect::Weighted => select_by_vote(candidates, true),
            RevisionSelect::Best => select_best_score(candidates),
            RevisionSelect::Last => select_among(
                candidates,
                |c| last.contains(&c.node),
                |pool| select_by_vote(pool, false),
            ),
        }
    }
}

#[async_trait]
impl Strategy for Revision {
    fn name(&self) -> &str {
        NAME
    }

    async fn search(&self, ctx: &Context) -> Result<Selection> {
        // Error paths leave sequences open: the driver releases every sequence a search opened.
        let p = &self.params;
        let root = ctx.open().await?;
        let forks = (0..p.chains)
            .map(|_| ctx.fork(&root))
            .collect::<Result<Vec<_>>>()?;
        let Some((first, mut rounds_planned)) = self.round(ctx, 0, forks).await? else {
            return Err(StrategyError::invalid(
                NAME,
                "budget_tokens",
                format!(
                    "{} tokens leave no share for a first attempt on each of {} chains",
                    ctx.budget().tokens,
                    p.chains
                ),
            ));
        };
        // Each chain's attempts, oldest first.
        let mut chains: Vec<Vec<Attempt>> = first.into_iter().map(|a| vec![a]).collect();
        let mut rounds = 1;
        for round in 1..p.attempts {
            if round >= rounds_planned {
                break;
            }
            let mut opened = Vec::with_capacity(chains.len());
            for chain in &chains {
                let from = chain.len().saturating_sub(self.shown(round));
                let shown = chain.get(from..).unwrap_or_default();
                opened.push(ctx.open_with(&self.revision_prompt(ctx, shown)).await?);
            }
            let Some((made, planned)) = self.round(ctx, round, opened).await? else {
                break;
            };
            rounds_planned = planned;
            for (chain, attempt) in chains.iter_mut().zip(made) {
                if let Some(prev) = chain.last() {
                    let prev = prev.node;
                    ctx.with_tree(|t| t.note(attempt.node, "revises", prev));
                }
                chain.push(attempt);
            }
            rounds += 1;
        }
        ctx.release(&root);
        ctx.with_tree(|t| t.note(SearchTree::ROOT, "rounds", rounds));
        let last: Vec<NodeId> = chains
            .iter()
            .filter_map(|c| c.last().map(|a| a.node))
            .collect();
        Ok(self.choose(&ctx.candidates(), &last))
    }

    fn select(&self, candidates: &[Candidate]) -> Selection {
        // Without the chains (an interrupted search): every attempt is a chain's latest.
        let all: Vec<NodeId> = candidates.iter().map(|c| c.node).collect();
        self.choose(candidates, &all)
    }
}
