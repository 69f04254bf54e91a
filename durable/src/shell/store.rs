//! The Durable Object's own SQLite behind the engine's [`Store`] trait.

use super::*;

/// The Durable Object's own SQLite, behind the engine's [`Store`] trait. Staged streamed
/// parts are written before any statement runs, so whatever reads or writes the session —
/// a route, the alarm, an engine held across an await — sees the whole timeline and gives
/// out sequences after them. (Only the staging itself uses the store without that: [`DoStore::raw`].)
#[derive(Clone)]
pub struct DoStore {
    pub(super) sql: SqlStorage,
    pub(super) staging: Option<Rc<RefCell<super::staging::Staging>>>,
}

impl DoStore {
    /// The same SQLite without writing staged parts first.
    pub(super) fn raw(&self) -> DoStore {
        DoStore {
            sql: self.sql.clone(),
            staging: None,
        }
    }

    fn write_staged(&self) {
        if let Some(staging) = &self.staging {
            super::staging::write_staged_and_forget_start(&self.raw(), staging);
        }
    }
}

pub(super) fn to_do(v: &SqlValue) -> SqlStorageValue {
    match v {
        SqlValue::Null => SqlStorageValue::Null,
        SqlValue::Integer(i) => SqlStorageValue::Integer(*i),
        SqlValue::Real(f) => SqlStorageValue::Float(*f),
        SqlValue::Text(s) => SqlStorageValue::String(s.clone()),
        SqlValue::Blob(b) => SqlStorageValue::Blob(b.clone()),
    }
}

pub(super) fn from_do(v: SqlStorageValue) -> SqlValue {
    match v {
        SqlStorageValue::Null => SqlValue::Null,
        SqlStorageValue::Boolean(b) => SqlValue::Integer(i64::from(b)),
        SqlStorageValue::Integer(i) => SqlValue::Integer(i),
        SqlStorageValue::Float(f) => SqlValue::Real(f),
        SqlStorageValue::String(s) => SqlValue::Text(s),
        SqlStorageValue::Blob(b) => SqlValue::Blob(b),
    }
}

impl Store for DoStore {
    fn query(&self, sql: &str, params: &[SqlValue]) -> StoreResult<Vec<Row>> {
        self.write_staged();
        let cursor = self
            .sql
            .exec(sql, params.iter().map(to_do).collect::<Vec<_>>())
            .map_err(|e| StoreError(e.to_string()))?;
        cursor
            .raw()
            .map(|row| {
                row.map(|values| values.into_iter().map(from_do).collect())
                    .map_err(|e| StoreError(e.to_string()))
            })
            .collect()
    }

    fn execute_script(&self, sql: &str) -> StoreResult<()> {
        // The object's SQLite runs every statement of a script in one call.
        self.write_staged();
        let cursor = self
            .sql
            .exec(sql, None)
            .map_err(|e| StoreError(e.to_string()))?;
        for row in cursor.raw() {
            row.map_err(|e| StoreError(e.to_string()))?;
        }
        Ok(())
    }

    fn atomically<T>(&self, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        // A synchronous run of statements with no await in between is committed together.
        f()
    }
}
