//! The Durable Object's own SQLite behind the engine's [`Store`] trait.

use super::*;

/// The Durable Object's own SQLite, behind the engine's [`Store`] trait.
#[derive(Clone)]
pub struct DoStore {
    pub(super) sql: SqlStorage,
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
