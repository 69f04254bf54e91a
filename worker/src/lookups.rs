//! What sessions created together read of the deployment once each (pure: tested
//! natively; the session creation in `objects.rs` uses it).

use inspect_protocol::ApiError;
use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;
use std::future::Future;

/// What sessions created together (one cron tick's) read of the deployment once each: the
/// repositories' rows and settings, the models offered, the grants, skills, MCP servers and
/// secrets' names that apply. A lone creation has its own, so it reads all of it as it is
/// now; a tick's sessions see the deployment as it was when the tick read it. A failed
/// read is not kept.
#[derive(Default)]
pub struct Lookups(RefCell<HashMap<String, Box<dyn Any>>>);

impl Lookups {
    /// The value kept under `key`, or what `read` reads (kept when it is read).
    pub async fn get<V, F>(&self, key: String, read: impl FnOnce() -> F) -> Result<V, ApiError>
    where
        V: Clone + 'static,
        F: Future<Output = Result<V, ApiError>>,
    {
        let kept = self
            .0
            .borrow()
            .get(&key)
            .and_then(|v| v.downcast_ref::<V>())
            .cloned();
        if let Some(v) = kept {
            return Ok(v);
        }
        let v = read().await?;
        self.0.borrow_mut().insert(key, Box::new(v.clone()));
        Ok(v)
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
}
