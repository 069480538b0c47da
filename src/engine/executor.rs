//! The executor actor: one thread owns the model, the KV store and the scheduler; everyone
//! else talks to it through channels.
//!
//! Handlers (HTTP requests, strategies, benchmarks) send a [`GroupRequest`] and get a
//! [`GroupHandle`] whose channel yields that group's [`Event`]s as the shared batch advances.
//! Commands are drained between steps, so new sequences join the running batch at the next
//! forward pass and a cancellation frees blocks at the next step. No lock is held across an
//! `.await`: there is no lock at all, only message passing (TGI's router shape).

use std::collections::HashMap;
use std::thread::JoinHandle;

use tokio::sync::{mpsc, oneshot};

use super::error::{EngineError, Result};
use super::kv::SeqId;
use super::scheduler::{Event, GroupRequest, Scheduler, SchedulerCounters};

enum Command {
    Submit { req: GroupRequest, reply: oneshot::Sender<Result<(Vec<SeqId>, mpsc::UnboundedReceiver<Event>)>> },
    Cancel(SeqId),
    Counters(oneshot::Sender<SchedulerCounters>),
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
    /// group is still running, so its blocks come back.
    fn drop(&mut self) {
        self.cancel();
    }
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Submit { .. } => "Submit",
            Self::Cancel(_) => "Cancel",
            Self::Counters(_) => "Counters",
            Self::Shutdown => "Shutdown",
        })
    }
}

fn stopped() -> EngineError {
    EngineError::Kv("the executor has stopped".into())
}

impl Executor {
    /// Starts the actor thread that owns `scheduler`.
    pub fn spawn(scheduler: Scheduler) -> Result<Self> {
        let (commands, rx) = mpsc::unbounded_channel();
        let thread = std::thread::Builder::new()
            .name("ponder-executor".into())
            .spawn(move || run(scheduler, rx))
            .map_err(|e| EngineError::Kv(format!("cannot start the executor thread: {e}")))?;
        Ok(Self { commands, thread: Some(thread) })
    }

    /// Queues a group; its events arrive on the returned handle.
    pub async fn submit(&self, req: GroupRequest) -> Result<GroupHandle> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Submit { req, reply }).map_err(|_| stopped())?;
        let (seqs, events) = answer.await.map_err(|_| stopped())??;
        Ok(GroupHandle { seqs, events, commands: self.commands.clone() })
    }

    /// The scheduler's counters.
    pub async fn counters(&self) -> Result<SchedulerCounters> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Counters(reply)).map_err(|_| stopped())?;
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

fn run(mut scheduler: Scheduler, mut rx: mpsc::UnboundedReceiver<Command>) {
    let mut routes: HashMap<SeqId, mpsc::UnboundedSender<Event>> = HashMap::new();
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
                    if let Some(tx) = routes.get(&seq) {
                        let _ = tx.send(event);
                    }
                    if last {
                        routes.remove(&seq);
                    }
                }
            }
            Err(e) => {
                // A step that cannot run (e.g. the pool cannot hold even one sequence) fails
                // every live group rather than spinning.
                tracing::error!(error = %e, "executor step failed; cancelling live sequences");
                for seq in routes.keys().copied().collect::<Vec<_>>() {
                    scheduler.cancel(seq);
                }
            }
        }
    }
}

fn handle(scheduler: &mut Scheduler, routes: &mut HashMap<SeqId, mpsc::UnboundedSender<Event>>, cmd: Command) {
    match cmd {
        Command::Submit { req, reply } => {
            let result = scheduler.submit(req).map(|seqs| {
                let (tx, rx) = mpsc::unbounded_channel();
                for s in &seqs {
                    routes.insert(*s, tx.clone());
                }
                (seqs, rx)
            });
            let _ = reply.send(result);
        }
        Command::Cancel(seq) => scheduler.cancel(seq),
        Command::Counters(reply) => {
            let _ = reply.send(scheduler.counters());
        }
        Command::Shutdown => {}
    }
}
