//! The budget meter: every generated token, every computed prefill token and every verifier
//! call of a search is charged here, and a call that could pass the hard cap is refused before
//! it runs.
//!
//! Calls reserve their worst case first (tokens they may generate plus context they may have to
//! compute), run, then settle what they actually cost and release the rest. A settlement never
//! charges more than its reservation (a generator or verifier that computed past the bound it
//! gave is charged its bound), so `spent() ≤ budget` holds at every moment, also with concurrent
//! calls. Cache hits are free and counted apart. A deadline, if set, is checked before every
//! call and interrupts a call in flight ([`Meter::deadline_passed`]).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Result, StrategyError};
use crate::generator::Cost;

/// What a request may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    /// Hard cap on tokens: generated + prefill computed + verifier tokens.
    pub tokens: u64,
    /// Optional wall-clock limit from the start of the search.
    pub deadline: Option<Duration>,
}

impl Budget {
    /// A token budget with no deadline.
    pub fn tokens(tokens: u64) -> Self {
        Self {
            tokens,
            deadline: None,
        }
    }
}

/// What a search spent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Usage {
    /// Tokens of the rendered prompt (read once per branch, computed at most once).
    pub prompt_tokens: u64,
    /// Tokens sampled by the generator.
    pub generated_tokens: u64,
    /// Context tokens the model computed.
    pub prefill_tokens_computed: u64,
    /// Context tokens served from the KV cache (free).
    pub prefill_tokens_reused: u64,
    /// Calls to verifiers (PRM, graders, judges).
    pub verifier_calls: u64,
    /// Tokens verifiers computed on the engine (charged to the budget).
    pub verifier_tokens: u64,
    /// Tokens spent on answer probes (already included in the counts above).
    pub probe_tokens: u64,
    /// Positions of the search's token tree the engine computed (prompt, appended text, and
    /// every sampled token fed back), each counted once.
    pub tree_tokens: u64,
    /// Positions the engine computed more than once for this search (KV lost between calls:
    /// evicted or preempted under memory pressure). Not charged; 0 on a quiet engine.
    pub recomputed_tokens: u64,
    /// Wall time of the search in milliseconds.
    pub wall_ms: u64,
}

impl Usage {
    /// Tokens charged against the budget.
    pub fn spent(&self) -> u64 {
        self.generated_tokens + self.prefill_tokens_computed + self.verifier_tokens
    }
}

#[derive(Debug, Default)]
struct MeterState {
    usage: Usage,
    reserved: u64,
    /// The token cap: the budget's, or lower after [`Meter::narrow`].
    cap: u64,
}

/// The meter of one search.
#[derive(Debug)]
pub struct Meter {
    budget: Budget,
    start: Instant,
    state: Mutex<MeterState>,
}

/// Tokens set aside for one call; settle it with [`Meter::settle`].
#[derive(Debug)]
#[must_use = "a reservation holds budget until it is settled"]
pub struct Reservation {
    tokens: u64,
}

impl Reservation {
    /// Tokens reserved.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }
}

impl Meter {
    /// A meter for `budget`, started now.
    pub fn new(budget: Budget) -> Self {
        Self {
            budget,
            start: Instant::now(),
            state: Mutex::new(MeterState {
                cap: budget.tokens,
                ..MeterState::default()
            }),
        }
    }

    /// The budget being enforced (its `tokens` lowered by [`Meter::narrow`], if it was).
    pub fn budget(&self) -> Budget {
        Budget {
            tokens: self.lock().cap,
            ..self.budget
        }
    }

    /// Lowers the token cap to `tokens`; never raises it. What was spent or reserved stays.
    pub fn narrow(&self, tokens: u64) {
        let mut s = self.lock();
        s.cap = s.cap.min(tokens);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, MeterState> {
        // A panic elsewhere cannot leave the counters half-updated (plain integer stores).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Fails if the deadline has passed.
    pub fn check_deadline(&self) -> Result<()> {
        match self.budget.deadline {
            Some(d) if self.start.elapsed() > d => Err(StrategyError::DeadlineExceeded {
                deadline_ms: d.as_millis() as u64,
            }),
            _ => Ok(()),
        }
    }

    /// Resolves once the deadline has passed (never, without one): a call in flight races it
    /// and is dropped (its engine work cancelled) when it loses.
    pub async fn deadline_passed(&self) -> StrategyError {
        match self.budget.deadline {
            Some(d) => {
                tokio::time::sleep_until(tokio::time::Instant::from_std(self.start + d)).await;
                StrategyError::DeadlineExceeded {
                    deadline_ms: d.as_millis() as u64,
                }
            }
            None => std::future::pending().await,
        }
    }

    /// Tokens neither spent nor reserved.
    pub fn available(&self) -> u64 {
        let s = self.lock();
        s.cap.saturating_sub(s.usage.spent() + s.reserved)
    }

    /// Sets aside `tokens`, or refuses if that would pass the cap.
    pub fn reserve(&self, tokens: u64) -> Result<Reservation> {
        self.check_deadline()?;
        let mut s = self.lock();
        let spent = s.usage.spent();
        if spent + s.reserved + tokens > s.cap {
            return Err(StrategyError::BudgetExhausted {
                budget: s.cap,
                spent,
                needed: tokens,
            });
        }
        s.reserved += tokens;
        Ok(Reservation { tokens })
    }

    /// Releases a reservation and charges what the call actually cost, never more than was
    /// reserved: sampled tokens first, then computed context, each cut to what is left of the
    /// reservation. Returns the tokens charged.
    pub fn settle(&self, reservation: Reservation, cost: Cost, kind: Charge) -> u64 {
        let mut s = self.lock();
        s.reserved -= reservation.tokens;
        let generated = cost.generated.min(reservation.tokens);
        let prefill = cost.prefill_computed.min(reservation.tokens - generated);
        s.usage.prefill_tokens_reused += cost.prefill_reused;
        s.usage.tree_tokens += cost.tree;
        s.usage.recomputed_tokens += cost.recomputed;
        match kind {
            Charge::Generation | Charge::Probe => {
                s.usage.generated_tokens += generated;
                s.usage.prefill_tokens_computed += prefill;
                if kind == Charge::Probe {
                    s.usage.probe_tokens += generated + prefill;
                }
            }
            Charge::Verifier => s.usage.verifier_tokens += generated + prefill,
        }
        generated + prefill
    }

    /// Counts one verifier call.
    pub fn count_verifier_call(&self) {
        self.lock().usage.verifier_calls += 1;
    }

    /// Usage so far, with the wall time up to now.
    pub fn usage(&self) -> Usage {
        let mut u = self.lock().usage;
        u.wall_ms = self.start.elapsed().as_millis() as u64;
        u
    }
}

/// What a settled call was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    /// The search's own generation.
    Generation,
    /// A cheap answer probe.
    Probe,
    /// A model-based verifier running on the engine.
    Verifier,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One call of a search: a kind, what it reserves, what it reports having computed (a
    /// verifier may compute past its bound; a generator may recharge whole blocks it recomputed).
    fn call() -> impl Strategy<Value = (u8, u64, u64, u64, u64)> {
        (0u8..3, 0u64..300, 0u64..400, 0u64..400, 0u64..64)
    }

    proptest! {
        #[test]
        fn settle_never_exceeds_its_reservation_nor_the_cap(
            cap in 0u64..2000,
            calls in proptest::collection::vec(call(), 1..40),
            overlap in 1usize..4,
        ) {
            let m = Meter::new(Budget::tokens(cap));
            let mut open: Vec<(Reservation, Cost, Charge)> = Vec::new();
            for (kind, reserve, generated, prefill, block_recharge) in calls {
                let kind = [Charge::Generation, Charge::Probe, Charge::Verifier][kind as usize];
                if let Ok(r) = m.reserve(reserve) {
                    let cost = Cost {
                        generated,
                        // A block recomputed and charged again on top of the context.
                        prefill_computed: prefill + block_recharge,
                        ..Cost::default()
                    };
                    open.push((r, cost, kind));
                }
                // Up to `overlap` calls are in flight at once; settle the oldest.
                while open.len() >= overlap {
                    let (r, cost, kind) = open.remove(0);
                    let reserved = r.tokens();
                    let before = m.usage().spent();
                    let charged = m.settle(r, cost, kind);
                    prop_assert!(charged <= reserved);
                    prop_assert_eq!(m.usage().spent() - before, charged);
                    prop_assert!(m.usage().spent() <= cap);
                }
            }
            for (r, cost, kind) in open {
                let reserved = r.tokens();
                prop_assert!(m.settle(r, cost, kind) <= reserved);
            }
            prop_assert!(m.usage().spent() <= cap);
            prop_assert_eq!(m.available(), cap - m.usage().spent());
        }
    }

    #[test]
    fn a_verifier_past_its_bound_is_charged_its_bound() -> Result<()> {
        let m = Meter::new(Budget::tokens(100));
        let r = m.reserve(10)?;
        let charged = m.settle(
            r,
            Cost {
                generated: 1,
                prefill_computed: 50,
                ..Cost::default()
            },
            Charge::Verifier,
        );
        assert_eq!(charged, 10);
        assert_eq!(m.usage().verifier_tokens, 10);
        assert_eq!(m.available(), 90);
        Ok(())
    }

    #[tokio::test]
    async fn the_deadline_future_fires_and_none_never_does() {
        let m = Meter::new(Budget {
            tokens: 10,
            deadline: Some(Duration::from_millis(5)),
        });
        let e = m.deadline_passed().await;
        assert!(matches!(
            e,
            StrategyError::DeadlineExceeded { deadline_ms: 5 }
        ));
        let none = Meter::new(Budget::tokens(10));
        let raced = tokio::time::timeout(Duration::from_millis(20), none.deadline_passed()).await;
        assert!(raced.is_err(), "no deadline: never fires");
    }

    #[test]
    fn refuses_past_the_cap_and_releases_unused_reservations() -> Result<()> {
        let m = Meter::new(Budget::tokens(100));
        let r = m.reserve(80)?;
        assert!(matches!(
            m.reserve(21),
            Err(StrategyError::BudgetExhausted { needed: 21, .. })
        ));
        m.settle(
            r,
            Cost {
                generated: 30,
                prefill_computed: 10,
                prefill_reused: 500,
                ..Cost::default()
            },
            Charge::Generation,
        );
        assert_eq!(m.available(), 60);
        assert_eq!(m.usage().prefill_tokens_reused, 500);
        let r = m.reserve(60)?;
        m.settle(
            r,
            Cost {
                generated: 60,
                ..Cost::default()
            },
            Charge::Probe,
        );
        assert_eq!(m.usage().spent(), 100);
        assert_eq!(m.usage().probe_tokens, 60);
        assert!(m.reserve(1).is_err());
        Ok(())
    }

    #[test]
    fn narrowing_lowers_the_cap_and_never_raises_it() -> Result<()> {
        let m = Meter::new(Budget::tokens(1000));
        let r = m.reserve(100)?;
        m.settle(
            r,
            Cost {
                generated: 100,
                ..Cost::default()
            },
            Charge::Generation,
        );
        m.narrow(300);
        assert_eq!(m.budget().tokens, 300);
        assert_eq!(m.available(), 200);
        assert!(matches!(
            m.reserve(201),
            Err(StrategyError::BudgetExhausted {
                budget: 300,
                spent: 100,
                needed: 201
            })
        ));
        m.narrow(5000);
        assert_eq!(m.budget().tokens, 300);
        m.narrow(50);
        assert_eq!(
            m.available(),
            0,
            "already spent past the new cap: nothing left, nothing lost"
        );
        assert_eq!(m.usage().spent(), 100);
        Ok(())
    }

    #[test]
    fn deadline_refuses_calls() {
        let m = Meter::new(Budget {
            tokens: 10,
            deadline: Some(Duration::ZERO),
        });
        std::thread::sleep(Duration::from_millis(2));
        assert!(matches!(
            m.reserve(1),
            Err(StrategyError::DeadlineExceeded { .. })
        ));
    }
}
