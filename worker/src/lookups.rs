//! What sessions created together read of the deployment once each, and their writes
//! grouped (pure: tested natively; the session creation in `objects.rs` uses it).

use futures::channel::oneshot;
use inspect_protocol::ApiError;
use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;

/// What sessions created together (one cron tick's) read of the deployment once each: the
/// repositories' rows and settings, the models offered, the grants, skills, MCP servers and
/// secrets' names that apply. A lone creation has its own, so it reads all of it as it is
/// now; a tick's sessions see the deployment as it was when the tick read it. Sessions made
/// at the same time wait for the one read already under way rather than each reading (a
/// tick starts 32 at once). A failed read is not kept: whoever waited on it reads again.
/// Their index rows are written together too ([`Grouped`]).
#[derive(Default)]
pub struct Lookups {
    reads: RefCell<HashMap<String, Slot>>,
    /// The sessions' index rows (each session's statements), several in one batch.
    #[cfg(target_arch = "wasm32")]
    pub index_rows: Grouped<Vec<worker::D1PreparedStatement>>,
}

/// A key's value, or the sessions waiting for the read under way.
enum Slot {
    Reading(Vec<oneshot::Sender<()>>),
    Kept(Box<dyn Any>),
}

impl Lookups {
    /// The value kept under `key`, or what `read` reads (kept when it is read).
    pub async fn get<V, F>(&self, key: String, read: impl FnOnce() -> F) -> Result<V, ApiError>
    where
        V: Clone + 'static,
        F: Future<Output = Result<V, ApiError>>,
    {
        loop {
            let waiting = match self.reads.borrow_mut().entry(key.clone()) {
                Entry::Occupied(mut slot) => match slot.get_mut() {
                    // A key read as one type is not taken for another: read again.
                    Slot::Kept(v) => match v.downcast_ref::<V>() {
                        Some(v) => return Ok(v.clone()),
                        None => {
                            slot.insert(Slot::Reading(Vec::new()));
                            None
                        }
                    },
                    Slot::Reading(waiters) => {
                        let (tx, rx) = oneshot::channel();
                        waiters.push(tx);
                        Some(rx)
                    }
                },
                Entry::Vacant(slot) => {
                    slot.insert(Slot::Reading(Vec::new()));
                    None
                }
            };
            match waiting {
                // Woken when the read ends, kept or not: look again.
                Some(rx) => {
                    let _ = rx.await;
                }
                None => break,
            }
        }
        let read = read().await;
        let waiters = match self.reads.borrow_mut().remove(&key) {
            Some(Slot::Reading(waiters)) => waiters,
            _ => Vec::new(),
        };
        if let Ok(v) = &read {
            self.reads
                .borrow_mut()
                .insert(key, Slot::Kept(Box::new(v.clone())));
        }
        waiters.into_iter().for_each(|w| {
            let _ = w.send(());
        });
        read
    }
}

/// Writes of sessions created together (a tick's index rows), grouped: the first is written
/// at once, and those that come while a write is on its way go together in the next, led by
/// the first of them. When a group's write fails, its writes are made again one by one, so
/// each learns its own outcome.
pub struct Grouped<T> {
    waiting: RefCell<Vec<(T, oneshot::Sender<Turn<T>>)>>,
    writing: Cell<bool>,
}

impl<T> Default for Grouped<T> {
    fn default() -> Self {
        Grouped {
            waiting: RefCell::new(Vec::new()),
            writing: Cell::new(false),
        }
    }
}

/// What a waiting write is told: written (how), or that it leads the next group.
enum Turn<T> {
    Written(Result<(), ApiError>),
    Lead(T),
}

/// A group's leader: when it ends (done, or dropped half way), the first write waiting
/// leads the next group, or no write is under way.
struct Leading<'a, T>(&'a Grouped<T>);

impl<T> Drop for Leading<'_, T> {
    fn drop(&mut self) {
        let grouped = self.0;
        loop {
            let next = {
                let mut waiting = grouped.waiting.borrow_mut();
                (!waiting.is_empty()).then(|| waiting.remove(0))
            };
            let Some((item, tx)) = next else {
                grouped.writing.set(false);
                return;
            };
            // One whose wait was dropped does not lead: the next one does.
            if tx.send(Turn::Lead(item)).is_ok() {
                return;
            }
        }
    }
}

impl<T: Clone> Grouped<T> {
    /// Writes `item` with `write` (which takes a group), alone or with others.
    pub async fn write<F, Fut>(&self, item: T, write: F) -> Result<(), ApiError>
    where
        F: Fn(Vec<T>) -> Fut,
        Fut: Future<Output = Result<(), ApiError>>,
    {
        let mine = match self.writing.replace(true) {
            false => item,
            true => {
                let (tx, rx) = oneshot::channel();
                self.waiting.borrow_mut().push((item, tx));
                match rx.await {
                    Ok(Turn::Written(outcome)) => return outcome,
                    Ok(Turn::Lead(item)) => item,
                    Err(_) => return Err(ApiError::internal("a grouped write was dropped")),
                }
            }
        };
        let _leading = Leading(self);
        let (mut items, mut told) = (vec![mine], Vec::new());
        for (item, tx) in std::mem::take(&mut *self.waiting.borrow_mut()) {
            items.push(item);
            told.push(tx);
        }
        let outcomes = match items.len() {
            1 => vec![write(items).await],
            n => match write(items.clone()).await {
                Ok(()) => vec![Ok(()); n],
                Err(_) => {
                    let mut outcomes = Vec::with_capacity(n);
                    for item in items {
                        outcomes.push(write(vec![item]).await);
                    }
                    outcomes
                }
            },
        };
        let mut outcomes = outcomes.into_iter();
        let own = outcomes
            .next()
            .unwrap_or_else(|| Err(ApiError::internal("a grouped write went missing")));
        for (tx, outcome) in told.into_iter().zip(outcomes) {
            let _ = tx.send(Turn::Written(outcome));
        }
        own
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;

    #[test]
    fn a_lookup_is_read_once_and_a_failed_one_is_read_again() {
        let lookups = Lookups::default();
        let reads = Cell::new(0);
        let read = |v: u32| {
            reads.set(reads.get() + 1);
            async move { Ok::<_, ApiError>(v) }
        };
        assert_eq!(block_on(lookups.get("a".into(), || read(1))).unwrap(), 1);
        assert_eq!(block_on(lookups.get("a".into(), || read(2))).unwrap(), 1);
        assert_eq!(block_on(lookups.get("b".into(), || read(3))).unwrap(), 3);
        assert_eq!(reads.get(), 2);
        let failed = block_on(lookups.get("c".into(), || async {
            Err::<u32, _>(ApiError::internal("down"))
        }));
        assert!(failed.is_err());
        assert_eq!(block_on(lookups.get("c".into(), || read(4))).unwrap(), 4);
        // A key read as one type is not taken for another.
        let other = block_on(lookups.get("a".into(), || async { Ok("text".to_owned()) }));
        assert_eq!(other.unwrap(), "text");
    }

    #[test]
    fn lookups_made_at_once_share_the_read_under_way() {
        let lookups = Lookups::default();
        let reads = Cell::new(0);
        let (open, opened) = oneshot::channel::<()>();
        let read = || {
            reads.set(reads.get() + 1);
            async { Ok::<_, ApiError>(7u32) }
        };
        // The first read waits until the others have asked.
        let first = lookups.get("k".into(), || {
            reads.set(reads.get() + 1);
            async move {
                let _ = opened.await;
                Ok::<_, ApiError>(7u32)
            }
        });
        let others =
            futures::future::join(lookups.get("k".into(), read), lookups.get("k".into(), read));
        let release = async {
            let _ = open.send(());
        };
        let (a, (b, c), ()) = block_on(futures::future::join3(first, others, release));
        assert_eq!((a.unwrap(), b.unwrap(), c.unwrap()), (7, 7, 7));
        assert_eq!(reads.get(), 1);

        // A failed read under way: those who waited read for themselves.
        let (fail, failing) = oneshot::channel::<()>();
        let failed = lookups.get("f".into(), || async move {
            let _ = failing.await;
            Err::<u32, _>(ApiError::internal("down"))
        });
        let waited = lookups.get("f".into(), || async { Ok::<_, ApiError>(8u32) });
        let release = async {
            let _ = fail.send(());
        };
        let (a, b, ()) = block_on(futures::future::join3(failed, waited, release));
        assert!(a.is_err());
        assert_eq!(b.unwrap(), 8);
    }

    #[test]
    fn writes_that_come_while_one_is_written_go_together_next() {
        let grouped = Grouped::<u32>::default();
        let groups = RefCell::new(Vec::new());
        let (open, opened) = oneshot::channel::<()>();
        let opened = RefCell::new(Some(opened));
        // The first group waits until the others have come; 13 fails any group it is in.
        let write = |items: Vec<u32>| {
            groups.borrow_mut().push(items.clone());
            let gate = opened.borrow_mut().take();
            async move {
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
                match items.contains(&13) {
                    true => Err(ApiError::internal("refused")),
                    false => Ok(()),
                }
            }
        };
        let release = async {
            let _ = open.send(());
        };
        let (a, b, c, d, ()) = block_on(futures::future::join5(
            grouped.write(1, write),
            grouped.write(2, write),
            grouped.write(13, write),
            grouped.write(4, write),
            release,
        ));
        assert!(a.is_ok() && b.is_ok() && d.is_ok());
        assert!(c.is_err());
        // 1 alone; the three that came meanwhile together; that group failed, so one by one.
        assert_eq!(
            *groups.borrow(),
            [vec![1], vec![2, 13, 4], vec![2], vec![13], vec![4]]
        );
        // Nothing under way: the next write goes at once, alone.
        groups.borrow_mut().clear();
        assert!(block_on(grouped.write(5, write)).is_ok());
        assert_eq!(*groups.borrow(), [vec![5]]);
    }

    #[test]
    fn a_leader_dropped_half_way_hands_the_lead_on() {
        let grouped = Grouped::<u32>::default();
        let (_never, pending) = oneshot::channel::<()>();
        let pending = RefCell::new(Some(pending));
        let write = |items: Vec<u32>| {
            let gate = pending.borrow_mut().take();
            async move {
                if let Some(gate) = gate {
                    let _ = gate.await;
                }
                assert!(!items.is_empty());
                Ok(())
            }
        };
        let mut first = Box::pin(grouped.write(1, write));
        let waker = futures::task::noop_waker();
        let mut cx = std::task::Context::from_waker(&waker);
        assert!(first.as_mut().poll(&mut cx).is_pending());
        let mut second = Box::pin(grouped.write(2, write));
        assert!(second.as_mut().poll(&mut cx).is_pending());
        drop(first);
        assert!(block_on(second).is_ok());
        assert!(!grouped.writing.get());
    }
}
