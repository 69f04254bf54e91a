//! What sessions created together read of the deployment once each (pure: tested
//! natively; the session creation in `objects.rs` uses it).

use futures::channel::oneshot;
use inspect_protocol::ApiError;
use std::any::Any;
use std::cell::RefCell;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;

/// What sessions created together (one cron tick's) read of the deployment once each: the
/// repositories' rows and settings, the models offered, the grants, skills, MCP servers and
/// secrets' names that apply. A lone creation has its own, so it reads all of it as it is
/// now; a tick's sessions see the deployment as it was when the tick read it. Sessions made
/// at the same time wait for the one read already under way rather than each reading (a
/// tick starts 32 at once). A failed read is not kept: whoever waited on it reads again.
#[derive(Default)]
pub struct Lookups(RefCell<HashMap<String, Slot>>);

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
            let waiting = match self.0.borrow_mut().entry(key.clone()) {
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
        let waiters = match self.0.borrow_mut().remove(&key) {
            Some(Slot::Reading(waiters)) => waiters,
            _ => Vec::new(),
        };
        if let Ok(v) = &read {
            self.0
                .borrow_mut()
                .insert(key, Slot::Kept(Box::new(v.clone())));
        }
        waiters.into_iter().for_each(|w| {
            let _ = w.send(());
        });
        read
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::executor::block_on;
    use std::cell::Cell;

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
}
