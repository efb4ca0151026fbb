//! Several inserts of one ordered sequence in flight at once, on a shared store, deciding as
//! one writer placing them in turn would.
//!
//! On a shared store an insert is a chain of round trips (docs/scaling.md, "Round trips"),
//! each waiting for the one before, so one insert at a time leaves the writer idle most of the
//! time. A [`Pipeline`] runs up to one insert per store connection at once and keeps the
//! sequence's decisions:
//!
//! - **Tickets in the sequence's order.** An insert takes its ticket only once every earlier
//!   insert has taken its own or turned out to need none (its value was a node already), and
//!   the insert in turn takes the tickets of those right after it that wait for theirs in the
//!   same round trip. So of two inserts with an edge, the later one in the sequence has the
//!   later ticket, sees the earlier one and waits for it to settle (the protocol of
//!   [`place`](super::place)).
//! - **Later inserts are not there yet.** An insert leaves out the pending nodes of inserts
//!   after it in the sequence, even before they have a ticket: they are neither its edges nor
//!   rivals in the evidence of others.
//! - **One clock per position.** An insert judges expiry by the newest event time of the
//!   documents up to its own ([`ForestStore::judge_expiry_at`]), not by the writer's clock that
//!   later inserts have already moved. The store may do so while the clock is at most half the
//!   sweep's grace ahead ([`CLOCK_SLACK_SECONDS`]); so an insert raises the writer's clock no
//!   further than that past the earliest insert still in flight (the clock catches up with
//!   the next inserts), and the sweep goes by the oldest clock of the writers alive.
//! - **Its own inserts are alive.** An insert never gives up the pending node of an earlier
//!   insert still in flight, however long it waits for it: the pending timeout is for a
//!   writer that died or stalled, and an insert given up would start again and take its
//!   ticket out of turn. The wait blocks until the pipeline marks the earlier insert
//!   finished, instead of scanning the store again and again.
//! - **One value, one insert at a time.** An insert whose fingerprint is that of an unfinished
//!   earlier insert waits for it, so that the earlier one creates the node and the later one
//!   joins it, as in turn.
//! - **Key postings in the sequence's order.** The inserts are numbered in the sequence's
//!   order before any starts ([`ForestStore::take_post_orders`]), and a key posting keeps its
//!   newest nodes by that number, not by when their round trips landed. No insert starts more
//!   than [`LATER_INSERTS_AT_MOST`] positions past the earliest unfinished one, so that a key
//!   posting, which a shared store keeps that many entries longer than its cap, still holds
//!   the cap's worth of earlier nodes for an insert when every later one has posted under the
//!   key (the insert leaves them out).
//!
//! What can still differ from one writer in turn, rarely (docs/scaling.md, "Several inserts
//! in flight", has each case): a tie-break child count that includes a later insert's leaf, a
//! chain refresh that a later insert dated later does not wait for, and a ticket taken out of
//! turn by an insert that passed its turn; and another writer's inserts interleave as they
//! come.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::placement::{ForestStats, Placement, Signature, Timestamp};
use super::store::{
    CLOCK_SLACK_SECONDS, ForestStore, InsertOrder, LATER_INSERTS_AT_MOST, SequenceClock,
    StoreError, new_token, place_in_order,
};
use crate::Fingerprint;

/// A writer with several inserts of one ordered sequence in flight: one per store
/// connection it holds. Placing a sequence decides as placing it one insert at a time would
/// (see the module docs for the rare exceptions).
///
/// ```
/// use tantivy_dedup::forest::{Forest, ForestStore, Pipeline, Signature};
/// use tantivy_dedup::Fingerprint;
///
/// // Any store works; a pipeline pays on a shared one, one connection per insert in flight
/// // (on Redis, `RedisStore::connect_several`: the connections share one link a node).
/// let stores: Vec<Box<dyn ForestStore + Send>> = vec![Box::new(Forest::new(3, 3600).unwrap())];
/// let mut pipeline = Pipeline::new(stores).unwrap();
/// let inserts = [
///     (Signature::from(Fingerprint(0b1111)), 100),
///     (Signature::from(Fingerprint(0b0111)), 101), // within k = 3 of the first
/// ];
/// let placed = pipeline.place_all(&inserts).unwrap();
/// assert_eq!(placed[1].root, placed[0].node);
/// ```
pub struct Pipeline {
    stores: Vec<Box<dyn ForestStore + Send>>,
}

impl Pipeline {
    /// A pipeline with one insert in flight per store; every store must be a connection to
    /// the same forest.
    pub fn new(mut stores: Vec<Box<dyn ForestStore + Send>>) -> Result<Self, StoreError> {
        if stores.is_empty() {
            return Err(StoreError::Config(
                "a pipeline needs at least one store connection".into(),
            ));
        }
        // One sequence, one writer: its connections keep one clock.
        let writer = new_token();
        for store in &mut stores {
            store.join_writer(writer);
        }
        Ok(Pipeline { stores })
    }

    /// How many inserts may be in flight at once.
    pub fn depth(&self) -> usize {
        self.stores.len()
    }

    /// The newest event time any of its connections has seen.
    pub fn newest_time(&self) -> Option<Timestamp> {
        self.stores
            .iter()
            .filter_map(|store| store.newest_time())
            .max()
    }

    /// Takes one document off a node's count (after a delete or a replacement).
    pub fn remove_document(&mut self, fingerprint: Fingerprint) -> Result<bool, StoreError> {
        self.stores[0].remove_document(fingerprint)
    }

    /// What the connections created, started and swept, added up.
    pub fn stats(&self) -> ForestStats {
        self.stores.iter().map(|store| store.stats()).fold(
            ForestStats::default(),
            |total, stats| ForestStats {
                nodes: total.nodes + stats.nodes,
                roots: total.roots + stats.roots,
                heap_bytes: total.heap_bytes + stats.heap_bytes,
                mapped_bytes: total.mapped_bytes + stats.mapped_bytes,
                expired: total.expired + stats.expired,
                round_trips: total.round_trips + stats.round_trips,
            },
        )
    }

    /// Places each `(signature, event time)` of `inserts`, in that order as far as decisions
    /// go, and gives their placements in the same order. On a store's error no further insert
    /// is started and the first error in the sequence's order is returned: nothing was
    /// acknowledged, and placing the sequence again is safe (what was placed is found again).
    pub fn place_all(
        &mut self,
        inserts: &[(Signature, Timestamp)],
    ) -> Result<Vec<Placement>, StoreError> {
        match self.place_in_order(inserts) {
            (placed, None) => Ok(placed),
            (_, Some(error)) => Err(error),
        }
    }

    /// Places `inserts` as [`place_all`](Self::place_all) does, and gives the placements in
    /// the sequence's order up to the first error, and that error: each of those was placed
    /// and can be acknowledged; of those after it, some may have been placed too (placing
    /// them again finds what was placed).
    pub fn place_in_order(
        &mut self,
        inserts: &[(Signature, Timestamp)],
    ) -> (Vec<Placement>, Option<StoreError>) {
        let count = inserts.len();
        if count == 0 {
            return (Vec::new(), None);
        }
        let mut newest = self.newest_time();
        let judged: Vec<Timestamp> = inserts
            .iter()
            .map(|&(_, time)| {
                let time = newest.map_or(time, |newest| newest.max(time));
                newest = Some(time);
                time
            })
            .collect();
        // `judged` is the prefix maximum: its last is the batch's newest time.
        let last = judged[count - 1];
        let tokens: Vec<u64> = (0..count).map(|_| new_token()).collect();
        let first_post = match self.stores[0].take_post_orders(count as u64) {
            Ok(first) => first,
            Err(error) => return (Vec::new(), Some(error)),
        };
        let sequence = Sequence {
            inserts,
            judged,
            first_post,
            positions: tokens.iter().enumerate().map(|(at, &t)| (t, at)).collect(),
            tokens,
            state: Mutex::new(State {
                next: 0,
                turn: 0,
                passed: vec![false; count],
                waiting: vec![false; count],
                tickets: vec![None; count],
                in_turn: vec![false; count],
                finished: vec![false; count],
                done: 0,
                failed: false,
            }),
            changed: Condvar::new(),
        };
        let mut placed: Vec<Option<Result<Placement, StoreError>>> =
            (0..count).map(|_| None).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = self
                .stores
                .iter_mut()
                .take(count)
                .map(|store| {
                    let sequence = &sequence;
                    scope.spawn(move || sequence.work(store.as_mut()))
                })
                .collect();
            for worker in workers {
                match worker.join() {
                    Ok(results) => {
                        for (at, result) in results {
                            placed[at] = Some(result);
                        }
                    }
                    Err(panic) => std::panic::resume_unwind(panic),
                }
            }
        });
        for store in &mut self.stores {
            store.judge_expiry_at(None);
            store.post_at(None);
        }
        let mut answered = Vec::with_capacity(count);
        for result in placed {
            match result {
                Some(Ok(placement)) => answered.push(placement),
                Some(Err(error)) => return (answered, Some(error)),
                None => {
                    let error = "an insert of the sequence was not started";
                    return (answered, Some(StoreError::Inconsistent(error.into())));
                }
            }
        }
        // The inserts raised the writer's clock only as far as the earliest one in flight
        // allowed: bring it to the batch's newest time, as one writer would have left it.
        match self.stores[0].advance_to(last) {
            Ok(_) => (answered, None),
            Err(error) => (answered, Some(error)),
        }
    }
}

/// The sequence being placed, shared by the workers.
struct Sequence<'a> {
    inserts: &'a [(Signature, Timestamp)],
    /// Per position, the newest event time up to it: what its insert judges expiry by.
    judged: Vec<Timestamp>,
    /// The post order of the first position; the others follow in the sequence's order.
    first_post: u64,
    tokens: Vec<u64>,
    /// Each insert's position, by its token.
    positions: HashMap<u64, usize>,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    /// The next position to start.
    next: usize,
    /// The first position that has not passed its turn to take a ticket.
    turn: usize,
    /// Per position, whether it has taken its ticket or needs none.
    passed: Vec<bool>,
    /// Per position, whether it waits for a ticket that the insert in turn may take with its
    /// own.
    waiting: Vec<bool>,
    /// Per position, a ticket taken for it by the insert in turn.
    tickets: Vec<Option<u64>>,
    /// Per position, whether its ticket was taken in turn (so after every earlier
    /// position's taken in turn). A position that passed its turn otherwise may take one out
    /// of turn, before an earlier position's.
    in_turn: Vec<bool>,
    finished: Vec<bool>,
    /// How many positions from the start are finished.
    done: usize,
    /// An insert failed: start no more.
    failed: bool,
}

impl Sequence<'_> {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A worker that panicked is re-raised by `place_all`; the state itself stays usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wait<'g>(&self, guard: MutexGuard<'g, State>) -> MutexGuard<'g, State> {
        self.changed
            .wait(guard)
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One worker: takes the next position when it may start, places it on `store`, until
    /// the sequence is done or failed.
    fn work(&self, store: &mut dyn ForestStore) -> Vec<(usize, Result<Placement, StoreError>)> {
        let mut results = Vec::new();
        while let Some((at, clock)) = self.start_next() {
            let (signature, time) = &self.inserts[at];
            store.judge_expiry_at(Some(clock));
            store.post_at(Some(self.first_post + at as u64));
            let order = Position { sequence: self, at };
            let result = place_in_order(store, signature, *time, self.tokens[at], &order);
            self.finish(at, result.is_err());
            results.push((at, result));
        }
        results
    }

    /// Claims the next position once it may start (it is at most [`LATER_INSERTS_AT_MOST`]
    /// past the earliest unfinished insert, and no unfinished earlier insert has its
    /// fingerprint), with the clock it goes by: its own position's newest time, and a raise
    /// of the writer's clock no further than the clock's slack past the earliest unfinished
    /// insert's. `None` once all are started, or one failed.
    fn start_next(&self) -> Option<(usize, SequenceClock)> {
        let mut state = self.lock();
        loop {
            if state.failed || state.next >= self.inserts.len() {
                return None;
            }
            let at = state.next;
            let fingerprint = self.inserts[at].0.fingerprint;
            let mut unfinished = (state.done..at).filter(|&earlier| !state.finished[earlier]);
            if at - state.done <= LATER_INSERTS_AT_MOST
                && !unfinished
                    .clone()
                    .any(|earlier| self.inserts[earlier].0.fingerprint == fingerprint)
            {
                let raise_at_most = unfinished.next().map_or(self.judged[at], |earliest| {
                    self.judged[earliest].saturating_add(CLOCK_SLACK_SECONDS)
                });
                state.next += 1;
                let clock = SequenceClock {
                    newest: self.judged[at],
                    raise_at_most,
                };
                return Some((at, clock));
            }
            state = self.wait(state);
        }
    }

    fn finish(&self, at: usize, failed: bool) {
        let mut state = self.lock();
        state.finished[at] = true;
        state.failed |= failed;
        while state.done < state.finished.len() && state.finished[state.done] {
            state.done += 1;
        }
        drop(state);
        self.changed.notify_all();
    }
}

/// One insert's place in the sequence.
struct Position<'s, 'a> {
    sequence: &'s Sequence<'a>,
    at: usize,
}

impl Position<'_, '_> {
    /// The position of `owner`'s insert if it is of this sequence and before this one.
    fn earlier_position(&self, owner: u64) -> Option<usize> {
        let at = *self.sequence.positions.get(&owner)?;
        (at < self.at).then_some(at)
    }
}

/// When its insert panics, the position is passed, finished and failed, so that the other
/// workers, which may be waiting for its turn or its value, go on and stop, and `place_all`
/// can re-raise the panic.
impl Drop for Position<'_, '_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.pass_turn();
            self.sequence.finish(self.at, true);
        }
    }
}

impl State {
    /// Moves the turn past every position that has passed it.
    fn advance(&mut self) {
        while self.turn < self.passed.len() && self.passed[self.turn] {
            self.turn += 1;
        }
    }
}

impl InsertOrder for Position<'_, '_> {
    /// The insert in turn takes its ticket together with those of the inserts right after it
    /// that wait for theirs: one round trip (and, on a Redis with `appendfsync always`, one
    /// fsync) for the lot instead of one each in turn.
    fn ticket(
        &self,
        hold: bool,
        take: &mut dyn FnMut(u64) -> Result<u64, StoreError>,
    ) -> Result<u64, StoreError> {
        let at = self.at;
        let mut state = self.sequence.lock();
        state.waiting[at] = !hold;
        loop {
            if let Some(ticket) = state.tickets[at].take() {
                return Ok(ticket); // taken for it by the insert in turn, which passed it
            }
            if state.turn >= at {
                break;
            }
            state = self.sequence.wait(state);
        }
        let mut block = vec![at];
        if !hold {
            for later in at + 1..state.passed.len() {
                if state.passed[later] {
                    continue;
                }
                if !state.waiting[later] {
                    break;
                }
                block.push(later);
            }
        }
        for &position in &block {
            state.waiting[position] = false;
        }
        drop(state);
        let taken = take(block.len() as u64);
        let mut state = self.sequence.lock();
        let result = match taken {
            Ok(last) => {
                let first = last.saturating_sub(block.len() as u64 - 1);
                for (ticket, &position) in (first..).zip(&block) {
                    if position != at {
                        state.tickets[position] = Some(ticket);
                    }
                    state.passed[position] |= position != at || !hold;
                    state.in_turn[position] = true;
                }
                Ok(first)
            }
            Err(error) => {
                // The others take theirs themselves.
                for &position in &block[1..] {
                    state.waiting[position] = true;
                }
                state.passed[at] = true;
                Err(error)
            }
        };
        state.advance();
        drop(state);
        self.sequence.changed.notify_all();
        result
    }

    fn pass_turn(&self) {
        let mut state = self.sequence.lock();
        state.passed[self.at] = true;
        state.advance();
        drop(state);
        self.sequence.changed.notify_all();
    }

    fn is_later(&self, owner: u64) -> bool {
        self.sequence.positions.get(&owner).is_some_and(|&at| {
            let state = self.sequence.lock();
            at > self.at && (!state.passed[at] || state.in_turn[at])
        })
    }

    fn is_earlier(&self, owner: u64) -> bool {
        self.earlier_position(owner).is_some()
    }

    fn is_earlier_in_flight(&self, owner: u64) -> bool {
        self.earlier_position(owner)
            .is_some_and(|at| !self.sequence.lock().finished[at])
    }

    fn wait_until_finished(&self, owner: u64) -> bool {
        let Some(at) = self.earlier_position(owner) else {
            return false;
        };
        let mut state = self.sequence.lock();
        if state.finished[at] {
            // Done, and its node still pending: it failed, and could not give the node up.
            return false;
        }
        while !state.finished[at] {
            state = self.sequence.wait(state);
        }
        true
    }
}
