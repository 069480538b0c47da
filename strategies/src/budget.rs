//! The budget meter: every generated token, every computed prefill token and every verifier
//! call of a search is charged here, and a call that could pass the hard cap is refused before
//! it runs.
//!
//! Calls reserve their worst case first (tokens they may generate plus context they may have to
//! compute), run, then settle what they actually cost and release the rest. So `spent() ≤
//! budget` holds at every moment, also with concurrent calls, as long as generators report
//! bounds they keep (see [`crate::Generator::prefill_bound`]). Cache hits are free and counted
//! apart. A deadline, if set, is checked before every call.

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

    /// Releases a reservation and charges what the call actually cost.
    pub fn settle(&self, reservation: Reservation, cost: Cost, kind: Charge) {
        let mut s = self.lock();
        s.reserved -= reservation.tokens;
        s.usage.prefill_tokens_reused += cost.prefill_reused;
        match kind {
            Charge::Generation | Charge::Probe => {
                s.usage.generated_tokens += cost.generated;
                s.usage.prefill_tokens_computed += cost.prefill_computed;
                if kind == Charge::Probe {
                    s.usage.probe_tokens += cost.generated + cost.prefill_computed;
                }
            }
            Charge::Verifier => s.usage.verifier_tokens += cost.generated + cost.prefill_computed,
        }
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
