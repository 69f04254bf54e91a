//! A rusqlite-backed [`Store`] for native tests: the same SQL as the Durable Object.

use crate::store::{Row, SqlValue, Store, StoreError, StoreResult};
use rusqlite::types::{Value, ValueRef};

pub struct SqliteStore {
    conn: rusqlite::Connection,
    /// Every statement run, in order (tests count a path's statements with it).
    log: std::cell::RefCell<Vec<String>>,
}

impl SqliteStore {
    pub fn in_memory() -> Self {
        SqliteStore {
            conn: rusqlite::Connection::open_in_memory().expect("open sqlite"),
            log: Default::default(),
        }
    }

    /// Every table's columns (name, type, not null, default, key) and every index (its
    /// table, uniqueness, columns), as SQLite reports them: two schemas made differently
    /// (a script, or migrations one by one) compare equal when they hold the same.
    pub fn shape(&self) -> Vec<String> {
        let rows = |sql: &str| self.query(sql, &[]).expect("a schema query");
        let text = |v: &crate::store::SqlValue| v.clone().into_string().unwrap_or_default();
        let mut out = Vec::new();
        for table in rows(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name",
        ) {
            let table = text(&table[0]);
            for c in rows(&format!("PRAGMA table_info({table})")) {
                out.push(format!("{table}: {c:?}"));
            }
            for i in rows(&format!("PRAGMA index_list({table})")) {
                let columns = rows(&format!("PRAGMA index_info({})", text(&i[1])));
                // Automatic indexes are named by position: compare what they index.
                out.push(format!("{table} index unique={:?} {columns:?}", i[2]));
            }
        }
        out.sort();
        out
    }

    /// The statements run since the last call, and forgets them.
    pub fn take_statements(&self) -> Vec<String> {
        std::mem::take(&mut self.log.borrow_mut())
    }
}

fn to_sql(v: &SqlValue) -> Value {
    match v {
        SqlValue::Null => Value::Null,
        SqlValue::Integer(i) => Value::Integer(*i),
        SqlValue::Real(f) => Value::Real(*f),
        SqlValue::Text(s) => Value::Text(s.clone()),
        SqlValue::Blob(b) => Value::Blob(b.clone()),
    }
}

fn err(e: rusqlite::Error) -> StoreError {
    StoreError(e.to_string())
}

impl Store for SqliteStore {
    fn query(&self, sql: &str, params: &[SqlValue]) -> StoreResult<Vec<Row>> {
        self.log
            .borrow_mut()
            .push(sql.split_whitespace().collect::<Vec<_>>().join(" "));
        let mut stmt = self.conn.prepare_cached(sql).map_err(err)?;
        let n = stmt.column_count();
        let params: Vec<Value> = params.iter().map(to_sql).collect();
        let mut rows = stmt
            .query(rusqlite::params_from_iter(params))
            .map_err(err)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(err)? {
            let mut values = Vec::with_capacity(n);
            for i in 0..n {
                values.push(match row.get_ref(i).map_err(err)? {
                    ValueRef::Null => SqlValue::Null,
                    ValueRef::Integer(i) => SqlValue::Integer(i),
                    ValueRef::Real(f) => SqlValue::Real(f),
                    ValueRef::Text(t) => SqlValue::Text(String::from_utf8_lossy(t).into_owned()),
                    ValueRef::Blob(b) => SqlValue::Blob(b.to_vec()),
                });
            }
            out.push(values);
        }
        Ok(out)
    }

    fn execute_script(&self, sql: &str) -> StoreResult<()> {
        self.log
            .borrow_mut()
            .push(sql.split_whitespace().collect::<Vec<_>>().join(" "));
        self.conn.execute_batch(sql).map_err(err)
    }

    fn atomically<T>(&self, f: impl FnOnce() -> StoreResult<T>) -> StoreResult<T> {
        self.conn.execute_batch("SAVEPOINT unit").map_err(err)?;
        match f() {
            Ok(v) => {
                self.conn.execute_batch("RELEASE unit").map_err(err)?;
                Ok(v)
            }
            Err(e) => {
                self.conn
                    .execute_batch("ROLLBACK TO unit; RELEASE unit")
                    .map_err(err)?;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    #[test]
    fn a_new_schema_is_what_the_migrations_make() {
        let stepwise = SqliteStore::in_memory();
        stepwise
            .execute(
                "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
                &[],
            )
            .unwrap();
        for m in schema::MIGRATIONS {
            stepwise.execute_script(m).unwrap();
        }
        let fresh = SqliteStore::in_memory();
        assert_eq!(schema::migrate(&fresh).unwrap(), schema::current_version());
        assert_eq!(fresh.shape(), stepwise.shape());
        // And an object made before the last migration is brought forward by it.
        let old = SqliteStore::in_memory();
        old.execute(
            "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
            &[],
        )
        .unwrap();
        for m in &schema::MIGRATIONS[..schema::MIGRATIONS.len() - 1] {
            old.execute_script(m).unwrap();
        }
        old.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?)",
            &[((schema::MIGRATIONS.len() - 1) as i64).into()],
        )
        .unwrap();
        assert_eq!(schema::migrate(&old).unwrap(), schema::current_version());
        assert_eq!(old.shape(), stepwise.shape());
    }

    #[test]
    fn migrations_are_idempotent() {
        let store = SqliteStore::in_memory();
        assert_eq!(schema::migrate(&store).unwrap(), schema::current_version());
        assert_eq!(schema::migrate(&store).unwrap(), schema::current_version());
        let v = store
            .scalar("SELECT version FROM schema_version", &[])
            .unwrap()
            .unwrap();
        assert_eq!(v.as_i64(), Some(schema::current_version()));
    }

    #[test]
    fn a_new_database_is_made_in_one_script_and_an_old_one_brought_forward() {
        let store = SqliteStore::in_memory();
        schema::migrate(&store).unwrap();
        // The version table looked for and made, the version read, then one script for all
        // the rest.
        assert_eq!(store.take_statements().len(), 4);
        // An object woken with its schema current only reads (a write, even one that
        // changes nothing, would cost it a commit).
        assert_eq!(
            schema::bring_forward(&store).unwrap(),
            schema::current_version()
        );
        let woken = store.take_statements();
        assert!(
            woken.iter().all(|s| s.trim_start().starts_with("SELECT")),
            "{woken:?}"
        );
        // A database known to be empty gets the same in one script.
        let known_empty = SqliteStore::in_memory();
        assert!(!schema::exists(&known_empty).unwrap());
        known_empty.take_statements();
        assert_eq!(
            schema::create(&known_empty).unwrap(),
            schema::current_version()
        );
        assert_eq!(known_empty.take_statements().len(), 1);
        assert_eq!(known_empty.shape(), store.shape());
        assert_eq!(
            schema::migrate(&known_empty).unwrap(),
            schema::current_version()
        );
        assert_eq!(known_empty.shape(), store.shape());
        // An object stored by an older release (here: after the first two migrations) gets
        // the rest, and its rows stay.
        let old = SqliteStore::in_memory();
        old.execute_script(
            "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);
             INSERT INTO schema_version VALUES (1, 2)",
        )
        .unwrap();
        for m in &schema::MIGRATIONS[..2] {
            old.execute_script(m).unwrap();
        }
        old.execute("INSERT INTO health_probe (id, probes) VALUES (1, 7)", &[])
            .unwrap();
        assert_eq!(schema::migrate(&old).unwrap(), schema::current_version());
        assert_eq!(old.shape(), store.shape());
        let probes = old
            .scalar("SELECT probes FROM health_probe", &[])
            .unwrap()
            .unwrap();
        assert_eq!(probes.as_i64(), Some(7));
    }

    #[test]
    fn events_keep_their_rows_and_sequence_when_their_id_index_goes() {
        let old = SqliteStore::in_memory();
        old.execute(
            "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
            &[],
        )
        .unwrap();
        let before = schema::MIGRATIONS.len() - 1;
        for m in &schema::MIGRATIONS[..before] {
            old.execute_script(m).unwrap();
        }
        old.execute(
            "INSERT INTO schema_version (id, version) VALUES (1, ?)",
            &[(before as i64).into()],
        )
        .unwrap();
        // Three events, the last moved up the timeline (a streamed part's newer version).
        for (seq, id, key) in [
            (1, "evt_a", None),
            (2, "evt_b", Some("tool:1")),
            (3, "evt_c", None),
        ] {
            old.execute(
                "INSERT INTO events (seq, id, kind, timestamp, data, part_key) VALUES (?, ?, 'k', 1, '{}', ?)",
                &[i64::from(seq).into(), id.into(), key.into()],
            )
            .unwrap();
        }
        old.execute("UPDATE events SET seq = 7 WHERE id = 'evt_b'", &[])
            .unwrap();
        assert_eq!(schema::migrate(&old).unwrap(), schema::current_version());
        let rows: Vec<(i64, String)> = old
            .query("SELECT seq, id FROM events ORDER BY seq", &[])
            .unwrap()
            .into_iter()
            .map(|r| (r[0].as_i64().unwrap(), r[1].as_str().unwrap().to_owned()))
            .collect();
        let expected = [(1, "evt_a"), (3, "evt_c"), (7, "evt_b")];
        assert_eq!(
            rows,
            expected.map(|(s, i)| (s, i.to_owned())).to_vec(),
            "every row, under its sequence"
        );
        // The next event comes after every one kept, and a part is still found by its key.
        old.execute(
            "INSERT INTO events (id, kind, timestamp, data) VALUES ('evt_d', 'k', 2, '{}')",
            &[],
        )
        .unwrap();
        let next = old
            .scalar("SELECT seq FROM events WHERE id = 'evt_d'", &[])
            .unwrap()
            .unwrap();
        assert_eq!(next.as_i64(), Some(8));
        let dup = old.execute(
            "INSERT INTO events (id, kind, timestamp, data, part_key) VALUES ('evt_e', 'k', 2, '{}', 'tool:1')",
            &[],
        );
        assert!(dup.is_err(), "part keys stay unique");
    }

    #[test]
    fn a_failed_unit_leaves_nothing_behind() {
        let store = SqliteStore::in_memory();
        schema::migrate(&store).unwrap();
        let r: StoreResult<()> = store.atomically(|| {
            store.execute("INSERT INTO health_probe (id, probes) VALUES (1, 1)", &[])?;
            Err(StoreError("boom".into()))
        });
        assert!(r.is_err());
        let n = store
            .scalar("SELECT COUNT(*) FROM health_probe", &[])
            .unwrap()
            .unwrap();
        assert_eq!(n.as_i64(), Some(0));
    }
}
