//! The small storage interface the engine runs on.
//!
//! In the Durable Object it is the object's SQLite (`ctx.storage.sql`); in native tests it
//! is rusqlite. Both run the very same SQL text. A state change is one synchronous run of
//! statements: the DO commits such a run together (write coalescing behind the output
//! gate), and the native store wraps it in a transaction, so both behave alike.

use std::fmt;

/// One SQL value, as both SQLite front-ends hand them over.
#[derive(Debug, Clone, PartialEq)]
pub enum SqlValue {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

pub type Row = Vec<SqlValue>;

impl From<i64> for SqlValue {
    fn from(v: i64) -> Self {
        SqlValue::Integer(v)
    }
}
impl From<usize> for SqlValue {
    fn from(v: usize) -> Self {
        SqlValue::Integer(i64::try_from(v).unwrap_or(i64::MAX))
    }
}
impl From<bool> for SqlValue {
    fn from(v: bool) -> Self {
        SqlValue::Integer(i64::from(v))
    }
}
impl From<f64> for SqlValue {
    fn from(v: f64) -> Self {
        SqlValue::Real(v)
    }
}
impl From<&str> for SqlValue {
    fn from(v: &str) -> Self {
        SqlValue::Text(v.to_owned())
    }
}
impl From<String> for SqlValue {
    fn from(v: String) -> Self {
        SqlValue::Text(v)
    }
}
impl From<&String> for SqlValue {
    fn from(v: &String) -> Self {
        SqlValue::Text(v.clone())
    }
}
impl<T: Into<SqlValue>> From<Option<T>> for SqlValue {
    fn from(v: Option<T>) -> Self {
        v.map_or(SqlValue::Null, Into::into)
    }
}

impl SqlValue {
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            SqlValue::Integer(v) => Some(*v),
            // The DO's SQL API hands numbers over as JS numbers.
            SqlValue::Real(v) if v.fract() == 0.0 => Some(*v as i64),
            _ => None,
        }
    }
    pub fn as_str(&self) -> Option<&str> {
        match self {
            SqlValue::Text(s) => Some(s),
            _ => None,
        }
    }
    pub fn into_string(self) -> Option<String> {
        match self {
            SqlValue::Text(s) => Some(s),
            _ => None,
        }
    }
    pub fn is_null(&self) -> bool {
        matches!(self, SqlValue::Null)
    }
}

/// A storage failure. These are bugs or platform faults, never the caller's input.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreError(pub String);

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "storage: {}", self.0)
    }
}
impl std::error::Error for StoreError {}

pub type StoreResult<T> = Result<T, StoreError>;

pub trait Store {
    /// Runs one statement with positional `?` parameters and returns every row.
    fn query(&self, sql: &str, params: &[SqlValue]) -> StoreResult<Vec<Row>>;

    /// Runs `f` as one unit: all of its writes land or none do.
    fn atomically<T>(&self, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T>;

    fn execute(&self, sql: &str, params: &[SqlValue]) -> StoreResult<()> {
        self.query(sql, params).map(|_| ())
    }

    /// Runs statements without parameters, separated by `;` (schema changes). A store
    /// whose SQLite takes a whole script in one call overrides this.
    fn execute_script(&self, sql: &str) -> StoreResult<()> {
        sql.split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .try_for_each(|statement| self.execute(statement, &[]))
    }

    /// The first column of the first row, if any.
    fn scalar(&self, sql: &str, params: &[SqlValue]) -> StoreResult<Option<SqlValue>> {
        Ok(self
            .query(sql, params)?
            .into_iter()
            .next()
            .and_then(|r| r.into_iter().next()))
    }
}

/// Reads typed columns out of a row, with a clear error on a schema mismatch.
pub struct Cols(std::vec::IntoIter<SqlValue>);

impl Cols {
    pub fn new(row: Row) -> Self {
        Cols(row.into_iter())
    }
    /// Whether the `n`th column still to read (0: the next) is NULL, without reading it
    /// (a LEFT JOIN that found no row leaves its columns NULL).
    pub fn ahead_is_null(&self, n: usize) -> bool {
        self.0.as_slice().get(n).is_none_or(SqlValue::is_null)
    }
    fn next(&mut self) -> StoreResult<SqlValue> {
        self.0
            .next()
            .ok_or_else(|| StoreError("row has fewer columns than expected".into()))
    }
    pub fn i64(&mut self) -> StoreResult<i64> {
        let v = self.next()?;
        v.as_i64()
            .ok_or_else(|| StoreError(format!("expected an integer, got {v:?}")))
    }
    pub fn opt_i64(&mut self) -> StoreResult<Option<i64>> {
        let v = self.next()?;
        if v.is_null() {
            return Ok(None);
        }
        v.as_i64()
            .map(Some)
            .ok_or_else(|| StoreError(format!("expected an integer, got {v:?}")))
    }
    pub fn string(&mut self) -> StoreResult<String> {
        match self.next()? {
            SqlValue::Text(s) => Ok(s),
            other => Err(StoreError(format!("expected text, got {other:?}"))),
        }
    }
    pub fn opt_string(&mut self) -> StoreResult<Option<String>> {
        match self.next()? {
            SqlValue::Null => Ok(None),
            SqlValue::Text(s) => Ok(Some(s)),
            other => Err(StoreError(format!("expected text, got {other:?}"))),
        }
    }
    pub fn bool(&mut self) -> StoreResult<bool> {
        Ok(self.i64()? != 0)
    }
}
