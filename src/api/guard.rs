//! Admission and authentication: a bounded queue in front of generation ([`Admission`]: at most
//! `max_running` requests run, `max_queue` more wait, the rest get 429 + `Retry-After`), the
//! [`Slot`] a request holds while it runs (its drop frees the place and the running gauge, also
//! when a client disconnects mid-stream), and bearer API keys ([`ApiKeys`]: compared in constant
//! time on SHA-256 digests, so neither content nor length leaks; never logged).
#![deny(clippy::indexing_slicing)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::error::AppError;
use super::metrics::Metrics;

/// The bounded queue in front of generation.
#[derive(Debug)]
pub struct Admission {
    running: Arc<Semaphore>,
    in_flight: AtomicUsize,
    capacity: usize,
    retry_after_s: u64,
}

/// A place in the queue, then a running slot; dropping it gives both back.
#[derive(Debug)]
pub struct Slot {
    admission: Arc<Admission>,
    metrics: Arc<Metrics>,
    permit: Option<OwnedSemaphorePermit>,
}

impl Admission {
    /// `max_running` at once and `max_queue` waiting.
    pub fn new(max_running: usize, max_queue: usize, retry_after_s: u64) -> Self {
        let max_running = max_running.max(1);
        Self {
            running: Arc::new(Semaphore::new(max_running)),
            in_flight: AtomicUsize::new(0),
            capacity: max_running + max_queue,
            retry_after_s,
        }
    }

    /// Takes a place in the queue (429 when full), then waits for a running slot.
    pub async fn admit(self: &Arc<Self>, metrics: &Arc<Metrics>) -> Result<Slot, AppError> {
        let taken = self
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.capacity).then_some(n + 1)
            });
        if let Err(n) = taken {
            return Err(AppError::Overloaded {
                queued: n,
                retry_after_s: self.retry_after_s,
            });
        }
        metrics.queued().inc();
        let waited = std::time::Instant::now();
        let mut slot = Slot {
            admission: Arc::clone(self),
            metrics: Arc::clone(metrics),
            permit: None,
        };
        let permit = Arc::clone(&self.running)
            .acquire_owned()
            .await
            .map_err(|_| AppError::Draining)?;
        metrics.queued().dec();
        metrics.running().inc();
        metrics.queue_time(waited.elapsed());
        slot.permit = Some(permit);
        Ok(slot)
    }

    /// Stops admitting: waiting requests get 503.
    pub fn close(&self) {
        self.running.close();
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.permit.take().is_some() {
            self.metrics.running().dec();
        } else {
            self.metrics.queued().dec();
        }
        self.admission.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Accepted bearer keys, kept as SHA-256 digests.
#[derive(Clone, Default)]
pub struct ApiKeys {
    digests: Vec<[u8; 32]>,
}

impl std::fmt::Debug for ApiKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKeys({} keys)", self.digests.len())
    }
}

fn digest(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

impl ApiKeys {
    /// No keys: every request is allowed.
    pub fn none() -> Self {
        Self::default()
    }

    /// These keys (blank ones are ignored).
    pub fn new<I: IntoIterator<Item = S>, S: AsRef<str>>(keys: I) -> Self {
        Self {
            digests: keys
                .into_iter()
                .map(|k| k.as_ref().trim().to_string())
                .filter(|k| !k.is_empty())
                .map(|k| digest(&k))
                .collect(),
        }
    }

    /// Keys from a comma- or newline-separated list (an env variable or a file's text).
    pub fn parse(text: &str) -> Self {
        Self::new(text.split([',', '\n']))
    }

    /// Whether any key is configured.
    pub fn is_enabled(&self) -> bool {
        !self.digests.is_empty()
    }

    /// Whether `authorization` (the header's value) carries an accepted key; always true
    /// without keys. Every configured key is compared, in constant time.
    pub fn allows(&self, authorization: Option<&str>) -> bool {
        if !self.is_enabled() {
            return true;
        }
        // The scheme is case-insensitive (RFC 9110 §11.1).
        let token = authorization
            .and_then(|h| h.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim());
        let Some(token) = token else { return false };
        let d = digest(token);
        let mut ok = subtle::Choice::from(0);
        for k in &self.digests {
            ok |= k.ct_eq(&d);
        }
        ok.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked_and_blank_lists_disable_auth() {
        let keys = ApiKeys::parse("alpha, beta\n");
        assert!(keys.allows(Some("Bearer beta")));
        assert!(!keys.allows(Some("Bearer gamma")));
        assert!(!keys.allows(Some("beta")));
        assert!(keys.allows(Some("bearer alpha")));
        assert!(!keys.allows(Some("Basic alpha")));
        assert!(!keys.allows(Some("Bearer ")));
        assert!(!keys.allows(None));
        assert!(ApiKeys::parse(" , ").allows(None));
    }

    #[tokio::test]
    async fn a_full_queue_refuses_with_retry_after() {
        let admission = Arc::new(Admission::new(1, 1, 3));
        let metrics = Arc::new(Metrics::default());
        let first = admission.admit(&metrics).await.ok();
        assert!(first.is_some());
        let a2 = Arc::clone(&admission);
        let m2 = Arc::clone(&metrics);
        let waiting = tokio::spawn(async move { a2.admit(&m2).await.map(|_| ()) });
        tokio::task::yield_now().await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        match admission.admit(&metrics).await {
            Err(AppError::Overloaded {
                retry_after_s: 3, ..
            }) => {}
            other => panic!("expected 429, got {other:?}"),
        }
        drop(first);
        assert!(waiting.await.is_ok_and(|r| r.is_ok()));
        assert_eq!(metrics.running().get(), 0);
        assert_eq!(metrics.queued().get(), 0);
    }
}
