//! The executor actor: one thread owns the model, the KV store and the scheduler; everyone
//! else talks to it through channels.
//!
//! Handlers (HTTP requests, strategies, benchmarks) send a [`GroupRequest`] and get a
//! [`GroupHandle`] whose channel yields that group's [`Event`]s as the shared batch advances.
//! Commands are drained between steps, so new sequences join the running batch at the next
//! forward pass and a cancellation frees blocks at the next step. No lock is held across an
//! `.await`: there is no lock at all, only message passing (TGI's router shape).
//!
//! Scoring requests ([`Executor::submit_score`]) join the same batches and answer once, on a
//! [`ScoreHandle`]; submitting several before awaiting any puts them in the same passes, and
//! dropping a handle cancels its request at the next step.
//!
//! Tracing: each submitted sequence gets a `sequence` span on the actor thread whose parent is
//! the span current where it was submitted (a request's `extend`), so its prefill and finish
//! events carry the request's id although another thread runs them.

use std::collections::HashMap;
use std::thread::JoinHandle;

use ponder_kvcache::KvCacheStats;
use tokio::sync::{mpsc, oneshot};

use super::error::{EngineError, Result};
use super::kv::SeqId;
use super::scheduler::{
    Event, GroupRequest, Scheduler, SchedulerCounters, ScoreRequest, Scored, SeqFinish,
};

type ScoreReply = oneshot::Sender<Result<Scored>>;

enum Command {
    Submit {
        req: GroupRequest,
        reply: oneshot::Sender<Result<(Vec<SeqId>, mpsc::UnboundedReceiver<Event>)>>,
        span: tracing::Span,
    },
    Score {
        req: ScoreRequest,
        reply: ScoreReply,
        span: tracing::Span,
    },
    Cancel(SeqId),
    ReleaseKept(SeqId),
    Counters(oneshot::Sender<SchedulerCounters>),
    KvStats(oneshot::Sender<KvCacheStats>),
    Shutdown,
}

/// A running executor; dropping it stops the thread (live groups' event streams then end).
#[derive(Debug)]
pub struct Executor {
    commands: mpsc::UnboundedSender<Command>,
    thread: Option<JoinHandle<()>>,
}

/// One submitted group: its branch ids and its event stream.
#[derive(Debug)]
pub struct GroupHandle {
    /// Branch ids, in the order of the request's samples.
    pub seqs: Vec<SeqId>,
    /// Tokens and finish events of this group's branches.
    pub events: mpsc::UnboundedReceiver<Event>,
    commands: mpsc::UnboundedSender<Command>,
}

impl GroupHandle {
    /// Cancels every branch of the group; their blocks are freed at the next step.
    pub fn cancel(&self) {
        for seq in &self.seqs {
            let _ = self.commands.send(Command::Cancel(*seq));
        }
    }
}

impl Drop for GroupHandle {
    /// A dropped handle (its caller gave up, e.g. a cancelled request) cancels whatever of its
    /// group is still running, so its blocks come back. A kept group's prompt is the caller's to
    /// release once it reads the prefill event; one it will never read is released here if it
    /// was delivered already, and by the executor (which cannot deliver it) otherwise.
    fn drop(&mut self) {
        self.cancel();
        self.events.close();
        while let Ok(event) = self.events.try_recv() {
            if let Event::Prefill {
                kept_prompt: Some(id),
                ..
            } = event
            {
                let _ = self.commands.send(Command::ReleaseKept(id));
            }
        }
    }
}

/// One submitted scoring request; [`ScoreHandle::wait`] yields its result. Dropping the handle
/// cancels the request.
#[derive(Debug)]
pub struct ScoreHandle {
    answer: oneshot::Receiver<Result<Scored>>,
}

impl ScoreHandle {
    /// Waits for the request to be scored.
    pub async fn wait(self) -> Result<Scored> {
        self.answer.await.map_err(|_| stopped())?
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Submit { .. } => "Submit",
            Self::Score { .. } => "Score",
            Self::Cancel(_) => "Cancel",
            Self::ReleaseKept(_) => "ReleaseKept",
            Self::Counters(_) => "Counters",
            Self::KvStats(_) => "KvStats",
            Self::Shutdown => "Shutdown",
        })
    }
}

fn stopped() -> EngineError {
    EngineError::ExecutorStopped
}

impl Executor {
    /// Starts the actor thread that owns `scheduler`.
    pub fn spawn(scheduler: Scheduler) -> Result<Self> {
        let (commands, rx) = mpsc::unbounded_channel();
        // The actor logs where its creator logs (the global subscriber, or a test's).
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        let thread = std::thread::Builder::new()
            .name("ponder-executor".into())
            .spawn(move || {
                let _log = tracing::dispatcher::set_default(&dispatch);
                run(scheduler, rx)
            })
            .map_err(EngineError::ExecutorStart)?;
        Ok(Self {
            commands,
            thread: Some(thread),
        })
    }

    /// Queues a group; its events arrive on the returned handle.
    ///
    /// The group is sent to the executor when this is called, not when the future is first
    /// polled, so a caller with many groups submits them all and then awaits the handles: they
    /// join the same step (the executor reads its commands between steps, so awaiting each
    /// reply before sending the next group would cost a forward pass per group). A future
    /// dropped unawaited cancels its group (the reply cannot be delivered).
    pub fn submit(
        &self,
        req: GroupRequest,
    ) -> impl std::future::Future<Output = Result<GroupHandle>> + Send + 'static {
        let (reply, answer) = oneshot::channel();
        let sent = self
            .commands
            .send(Command::Submit {
                req,
                reply,
                span: tracing::Span::current(),
            })
            .map_err(|_| stopped());
        let commands = self.commands.clone();
        async move {
            sent?;
            let (seqs, events) = answer.await.map_err(|_| stopped())??;
            Ok(GroupHandle {
                seqs,
                events,
                commands,
            })
        }
    }

    /// Queues a scoring request; it joins the next forward pass. Submit many before awaiting
    /// any to batch them.
    pub fn submit_score(&self, req: ScoreRequest) -> Result<ScoreHandle> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Score {
                req,
                reply,
                span: tracing::Span::current(),
            })
            .map_err(|_| stopped())?;
        Ok(ScoreHandle { answer })
    }

    /// Releases a branch kept by a [`GroupRequest::keep`] group (a no-op if it is not kept);
    /// callable from `Drop`.
    pub fn release_kept(&self, seq: SeqId) {
        let _ = self.commands.send(Command::ReleaseKept(seq));
    }

    /// The scheduler's counters.
    pub async fn counters(&self) -> Result<SchedulerCounters> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Counters(reply))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())
    }

    /// The KV store's block statistics (used, cached, free blocks; prefix reuse).
    pub async fn kv_stats(&self) -> Result<KvCacheStats> {
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::KvStats(reply))
            .map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Shutdown);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Where each live sequence's results go.
#[derive(Default)]
struct Routes {
    events: HashMap<SeqId, mpsc::UnboundedSender<Event>>,
    scores: HashMap<SeqId, ScoreReply>,
    /// Each live sequence's span (a child of its submitter's).
    spans: HashMap<SeqId, tracing::Span>,
}

fn run(mut scheduler: Scheduler, mut rx: mpsc::UnboundedReceiver<Command>) {
    let mut routes = Routes::default();
    loop {
        // Block for work when idle; otherwise take whatever arrived since the last step.
        if scheduler.is_idle() {
            match rx.blocking_recv() {
                Some(Command::Shutdown) | None => return,
                Some(cmd) => handle(&mut scheduler, &mut routes, cmd),
            }
        }
        while let Ok(cmd) = rx.try_recv() {
            if matches!(cmd, Command::Shutdown) {
                return;
            }
            handle(&mut scheduler, &mut routes, cmd);
        }
        // Scoring requests whose caller gave up.
        let abandoned: Vec<SeqId> = routes
            .scores
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(id, _)| *id)
            .collect();
        for seq in abandoned {
            routes.scores.remove(&seq);
            scheduler.cancel(seq);
        }
        if scheduler.is_idle() {
            continue;
        }
        match scheduler.step() {
            Ok(events) => {
                for event in events {
                    let (seq, last) = match &event {
                        Event::Token { seq, .. } | Event::Prefill { seq, .. } => (*seq, false),
                        Event::Finished { seq, .. } => (*seq, true),
                    };
                    if let (
                        Event::Finished {
                            reason: SeqFinish::Cancelled,
                            ..
                        },
                        Some(tx),
                    ) = (&event, routes.scores.remove(&seq))
                    {
                        let _ = tx.send(Err(EngineError::ScoreCancelled(seq)));
                    }
                    if let Some(span) = routes.spans.get(&seq) {
                        match &event {
                            Event::Prefill {
                                computed, reused, ..
                            } => span.in_scope(|| tracing::debug!(computed, reused, "prefilled")),
                            Event::Finished { reason, .. } => {
                                span.in_scope(|| tracing::debug!(?reason, "finished"))
                            }
                            Event::Token { .. } => {}
                        }
                    }
                    match routes.events.get(&seq) {
                        Some(tx) => {
                            if let Err(unread) = tx.send(event) {
                                unreceived(&mut scheduler, unread.0);
                            }
                        }
                        None => unreceived(&mut scheduler, event),
                    }
                    if last {
                        routes.events.remove(&seq);
                        routes.spans.remove(&seq);
                    }
                }
                for (seq, scored) in scheduler.take_scored() {
                    if let Some(span) = routes.spans.remove(&seq) {
                        span.in_scope(|| tracing::debug!("scored"));
                    }
                    if let Some(tx) = routes.scores.remove(&seq) {
                        let _ = tx.send(Ok(scored));
                    }
                }
            }
            Err(e) => {
                // A step that cannot run (e.g. the pool cannot hold even one sequence) fails
                // every live group rather than spinning.
                tracing::error!(error = %e, "executor step failed; cancelling live sequences");
                for seq in routes
                    .events
                    .keys()
                    .chain(routes.scores.keys())
                    .copied()
                    .collect::<Vec<_>>()
                {
                    scheduler.cancel(seq);
                }
            }
        }
    }
}

/// An event nobody can receive (its group's handle was dropped, or never reached its caller:
/// a `submit` given up while waiting for the reply). Nobody wants that sequence any more: it is
/// cancelled, and what the event would have handed the caller to release (a kept prompt, a
/// kept finished branch) is released, or nobody would.
fn unreceived(scheduler: &mut Scheduler, event: Event) {
    match event {
        Event::Prefill {
            seq, kept_prompt, ..
        } => {
            scheduler.cancel(seq);
            if let Some(id) = kept_prompt {
                scheduler.release_retained(id);
            }
        }
        Event::Token { seq, .. } => scheduler.cancel(seq),
        Event::Finished { seq, .. } => scheduler.release_retained(seq),
    }
}

fn handle(scheduler: &mut Scheduler, routes: &mut Routes, cmd: Command) {
    match cmd {
        Command::Score { req, reply, span } => match scheduler.submit_score(req) {
            Ok(seq) => {
                let span = tracing::debug_span!(parent: &span, "score_sequence", seq);
                span.in_scope(|| tracing::debug!("queued"));
                routes.spans.insert(seq, span);
                routes.scores.insert(seq, reply);
            }
            Err(e) => {
                let _ = reply.send(Err(e));
            }
        },
        Command::Submit { req, reply, span } => {
            let result = scheduler.submit(req).map(|seqs| {
                let (tx, rx) = mpsc::unbounded_channel();
                for s in &seqs {
                    routes.events.insert(*s, tx.clone());
                    let seq = *s;
                    let span = tracing::debug_span!(parent: &span, "sequence", seq);
                    span.in_scope(|| tracing::debug!("queued"));
                    routes.spans.insert(seq, span);
                }
                (seqs, rx)
            });
            // A caller that gave up waiting gets no handle to cancel its group with: cancel it.
            if let Err(Ok((seqs, _))) = reply.send(result) {
                for seq in seqs {
                    scheduler.cancel(seq);
                }
            }
        }
        Command::Cancel(seq) => scheduler.cancel(seq),
        Command::ReleaseKept(seq) => scheduler.release_retained(seq),
        Command::Counters(reply) => {
            let _ = reply.send(scheduler.counters());
        }
        Command::KvStats(reply) => {
            let _ = reply.send(scheduler.store().stats());
        }
        Command::Shutdown => {}
    }
}
