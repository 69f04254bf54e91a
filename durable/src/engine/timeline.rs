//! The timeline: append-only events with a strictly increasing sequence, read as the
//! latest window (on subscribe), older pages (scrolling back) or newer pages (REST readers
//! catching up). Cursors are opaque to clients and bound to their session.

use crate::engine::ids;
use crate::store::{Cols, SqlValue, Store, StoreError, StoreResult};
use inspect_protocol::limits::{HISTORY_PAGE_DEFAULT, HISTORY_PAGE_MAX};
use inspect_protocol::session::{event_kind, EventPage, EventWindow, EventsJson, TimelineEvent};
use inspect_protocol::ApiError;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// Appends one event and returns it with its sequence number.
pub fn append(
    store: &impl Store,
    kind: &str,
    message_id: Option<&str>,
    data: Map<String, Value>,
    now: i64,
) -> StoreResult<TimelineEvent> {
    let id = ids::new_id("evt");
    let body = serde_json::to_string(&data).unwrap_or_else(|_| "{}".into());
    let seq = store
        .scalar(
            "INSERT INTO events (id, kind, message_id, timestamp, data) VALUES (?, ?, ?, ?, ?) RETURNING seq",
            &[id.as_str().into(), kind.into(), message_id.into(), now.into(), body.into()],
        )?
        .and_then(|v| v.as_i64())
        .ok_or_else(|| crate::store::StoreError("insert returned no sequence".into()))?;
    Ok(TimelineEvent {
        id,
        seq,
        kind: kind.to_owned(),
        timestamp: now,
        message_id: message_id.map(str::to_owned),
        data,
    })
}

/// Appends an event that replaces the earlier one with the same `part_key` (a streamed
/// text part, a tool call by its id): the timeline keeps the latest version once, under a
/// new sequence number, so a client catching up gets the final state and a live client
/// sees the update arrive in order. One statement: the row is inserted, or updated in
/// place with its sequence moved past every other.
pub fn upsert(
    store: &impl Store,
    part_key: &str,
    kind: &str,
    message_id: Option<&str>,
    mut data: Map<String, Value>,
    now: i64,
) -> StoreResult<TimelineEvent> {
    data.remove("partKey");
    let body = serde_json::to_string(&data).unwrap_or_else(|_| "{}".into());
    let id = ids::part_event_id(part_key);
    let row = store
        .query(
            "INSERT INTO events (id, kind, message_id, timestamp, data, part_key) VALUES (?, ?, ?, ?, ?, ?)
             ON CONFLICT(part_key) DO UPDATE SET seq = (SELECT MAX(seq) FROM events) + 1,
                 id = excluded.id, kind = excluded.kind, message_id = excluded.message_id,
                 timestamp = excluded.timestamp, data = excluded.data
             RETURNING seq",
            &[
                id.as_str().into(),
                kind.into(),
                message_id.into(),
                now.into(),
                body.into(),
                part_key.into(),
            ],
        )?
        .into_iter()
        .next()
        .ok_or_else(|| crate::store::StoreError("upsert returned no row".into()))?;
    let seq = Cols::new(row).i64()?;
    Ok(TimelineEvent {
        id,
        seq,
        kind: kind.to_owned(),
        timestamp: now,
        message_id: message_id.map(str::to_owned),
        data,
    })
}

/// One streamed part for [`upsert_many`].
#[derive(Debug, Clone)]
pub struct Part {
    pub part_key: String,
    pub kind: String,
    pub message_id: Option<String>,
    pub data: Map<String, Value>,
}

/// [`upsert`] for many parts in one statement (a batch frame's streamed parts): each is
/// inserted or updated in place with its sequence moved past every other; part `k` of the
/// list gets the sequence after the newest plus `k`, so the sequences follow the list. A
/// part key must appear once.
pub fn upsert_many(
    store: &impl Store,
    parts: Vec<Part>,
    now: i64,
) -> StoreResult<Vec<TimelineEvent>> {
    if parts.is_empty() {
        return Ok(vec![]);
    }
    let rows: Vec<Value> = parts
        .iter()
        .map(|p| {
            let mut data = p.data.clone();
            data.remove("partKey");
            Value::Array(vec![
                Value::String(ids::part_event_id(&p.part_key)),
                Value::String(p.kind.clone()),
                p.message_id.clone().map_or(Value::Null, Value::String),
                Value::String(serde_json::to_string(&data).unwrap_or_else(|_| "{}".into())),
                Value::String(p.part_key.clone()),
            ])
        })
        .collect();
    let rows = Value::Array(rows).to_string();
    let returned = store.query(
        "INSERT INTO events (seq, id, kind, message_id, timestamp, data, part_key)
         SELECT (SELECT COALESCE(MAX(seq), 0) FROM events) + 1 + key,
                json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]'),
                ?, json_extract(value, '$[3]'), json_extract(value, '$[4]')
         FROM json_each(?) WHERE true ORDER BY key
         ON CONFLICT(part_key) DO UPDATE SET seq = excluded.seq, id = excluded.id,
             kind = excluded.kind, message_id = excluded.message_id,
             timestamp = excluded.timestamp, data = excluded.data
         RETURNING seq, id, part_key",
        &[now.into(), rows.into()],
    )?;
    let mut stored: std::collections::HashMap<String, (i64, String)> = Default::default();
    for row in returned {
        let mut c = Cols::new(row);
        let seq = c.i64()?;
        let id = c.string()?;
        let key = c.string()?;
        stored.insert(key, (seq, id));
    }
    let mut events = parts
        .into_iter()
        .map(|mut p| {
            let (seq, id) = stored.remove(&p.part_key).ok_or_else(|| {
                crate::store::StoreError("upsert returned no row for a part".into())
            })?;
            p.data.remove("partKey");
            Ok(TimelineEvent {
                id,
                seq,
                kind: p.kind,
                timestamp: now,
                message_id: p.message_id,
                data: p.data,
            })
        })
        .collect::<StoreResult<Vec<_>>>()?;
    events.sort_by_key(|e| e.seq);
    Ok(events)
}

fn read_rows(
    store: &impl Store,
    sql: &str,
    params: &[SqlValue],
) -> StoreResult<Vec<TimelineEvent>> {
    store
        .query(sql, params)?
        .into_iter()
        .map(|row| {
            let mut c = Cols::new(row);
            let seq = c.i64()?;
            let id = c.string()?;
            let kind = c.string()?;
            let message_id = c.opt_string()?;
            let timestamp = c.i64()?;
            let data = match serde_json::from_str::<Value>(&c.string()?) {
                Ok(Value::Object(map)) => map,
                _ => Map::new(),
            };
            Ok(TimelineEvent {
                id,
                seq,
                kind,
                timestamp,
                message_id,
                data,
            })
        })
        .collect()
}

const COLUMNS: &str = "seq, id, kind, message_id, timestamp, data";

/// A cursor names a position in one session's timeline.
pub struct CursorCodec<'a> {
    pub session_id: &'a str,
}

impl CursorCodec<'_> {
    fn check(&self) -> String {
        hex::encode(&Sha256::digest(self.session_id.as_bytes())[..4])
    }

    pub fn encode(&self, seq: i64) -> String {
        format!("{}{:x}", self.check(), seq)
    }

    pub fn decode(&self, cursor: &str) -> Result<i64, ApiError> {
        let check = self.check();
        let Some(rest) = cursor.strip_prefix(&check) else {
            return Err(ApiError::bad_request(
                "cursor does not belong to this session",
            ));
        };
        i64::from_str_radix(rest, 16)
            .ok()
            .filter(|s| *s >= 0)
            .ok_or_else(|| ApiError::bad_request("malformed cursor"))
    }
}

pub fn clamp_limit(limit: Option<usize>) -> usize {
    limit
        .unwrap_or(HISTORY_PAGE_DEFAULT)
        .clamp(1, HISTORY_PAGE_MAX)
}

/// Above every sequence number, and still a safe JavaScript integer (a larger one makes
/// workers-rs warn on the console at every subscribe).
pub const NEWEST: i64 = (1 << 53) - 1;

/// Up to `limit` events older than `before` (heartbeats excluded), oldest first, typed:
/// the reference [`window_older_than`] (what the sockets send) is tested against.
#[cfg(test)]
pub fn older_than(
    store: &impl Store,
    codec: &CursorCodec<'_>,
    before: i64,
    limit: usize,
) -> StoreResult<EventPage> {
    let mut events = read_rows(
        store,
        &format!(
            "SELECT {COLUMNS} FROM events WHERE seq < ? AND kind != ? ORDER BY seq DESC LIMIT ?"
        ),
        &[
            before.into(),
            event_kind::HEARTBEAT.into(),
            (limit + 1).into(),
        ],
    )?;
    let has_more = events.len() > limit;
    events.truncate(limit);
    events.reverse();
    let cursor = if has_more {
        events.first().map(|e| codec.encode(e.seq))
    } else {
        None
    };
    Ok(EventPage {
        events,
        cursor,
        has_more,
    })
}

/// [`older_than`] as the client socket sends it: SQLite writes the events' JSON (each
/// row's data with its id, sequence, type, time and prompt set on it) as one array, in one
/// statement, and the object passes that text on without parsing it.
pub fn window_older_than(
    store: &impl Store,
    codec: &CursorCodec<'_>,
    before: i64,
    limit: usize,
) -> StoreResult<EventWindow> {
    let row = store
        .query(
            "WITH w AS (SELECT seq, id, kind, message_id, timestamp, data FROM events
                        WHERE seq < ? AND kind != ? ORDER BY seq DESC LIMIT ?)
             SELECT json_group_array(
                      json_patch(
                        json_set(CASE WHEN json_type(data) = 'object' THEN data ELSE '{}' END,
                                 '$.id', id, '$.seq', seq, '$.type', kind, '$.timestamp', timestamp),
                        -- A merge patch: a null messageId leaves the key out.
                        json_object('messageId', message_id))
                      ORDER BY seq),
                    MIN(seq),
                    EXISTS (SELECT 1 FROM events e WHERE e.seq < (SELECT MIN(seq) FROM w) AND e.kind != ?)
             FROM w",
            &[
                before.into(),
                event_kind::HEARTBEAT.into(),
                limit.into(),
                event_kind::HEARTBEAT.into(),
            ],
        )?
        .into_iter()
        .next()
        .ok_or_else(|| StoreError("the timeline window returned no row".into()))?;
    let mut c = Cols::new(row);
    let events = EventsJson::from_text(c.string()?).map_err(|e| StoreError(e.to_string()))?;
    let oldest = c.opt_i64()?;
    let has_more = c.i64()? != 0;
    Ok(EventWindow {
        events,
        cursor: oldest.filter(|_| has_more).map(|seq| codec.encode(seq)),
        has_more,
    })
}

/// Up to `limit` events newer than `after`, oldest first (all kinds): how a REST reader
/// walks the whole timeline and polls for more. The cursor points after the last one.
pub fn newer_than(
    store: &impl Store,
    codec: &CursorCodec<'_>,
    after: i64,
    limit: usize,
) -> StoreResult<EventPage> {
    newer_than_filtered(store, codec, after, limit, &EventFilter::default())
}

/// Which events a REST reader wants: some types only, one prompt's only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EventFilter {
    pub kinds: Vec<String>,
    pub message_id: Option<String>,
}

impl EventFilter {
    /// `type=a,b` (also repeated) and `message_id=`; at most 20 types, each a plain name.
    pub fn parse(types: &[String], message_id: Option<String>) -> Result<Self, ApiError> {
        let mut kinds: Vec<String> = types
            .iter()
            .flat_map(|t| t.split(','))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_owned)
            .collect();
        kinds.sort();
        kinds.dedup();
        if kinds.len() > 20
            || kinds
                .iter()
                .any(|k| k.len() > 40 || !k.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'))
        {
            return Err(ApiError::bad_request(
                "type is up to 20 event types (snake_case), comma-separated",
            ));
        }
        if message_id
            .as_ref()
            .is_some_and(|m| m.is_empty() || m.len() > 100)
        {
            return Err(ApiError::bad_request("invalid message_id"));
        }
        Ok(EventFilter { kinds, message_id })
    }
}

/// [`newer_than`] for the events a filter keeps; the cursor still moves past what was
/// read, so paging a filtered view ends.
pub fn newer_than_filtered(
    store: &impl Store,
    codec: &CursorCodec<'_>,
    after: i64,
    limit: usize,
    filter: &EventFilter,
) -> StoreResult<EventPage> {
    let mut sql = format!("SELECT {COLUMNS} FROM events WHERE seq > ?");
    let mut args: Vec<SqlValue> = vec![after.into()];
    if !filter.kinds.is_empty() {
        sql.push_str(&format!(
            " AND kind IN ({})",
            vec!["?"; filter.kinds.len()].join(", ")
        ));
        args.extend(filter.kinds.iter().map(|k| k.as_str().into()));
    }
    if let Some(m) = &filter.message_id {
        sql.push_str(" AND message_id = ?");
        args.push(m.as_str().into());
    }
    sql.push_str(" ORDER BY seq ASC LIMIT ?");
    args.push((limit + 1).into());
    let mut events = read_rows(store, &sql, &args)?;
    let has_more = events.len() > limit;
    events.truncate(limit);
    let last = events.last().map(|e| e.seq).unwrap_or(after);
    Ok(EventPage {
        events,
        cursor: Some(codec.encode(last)),
        has_more,
    })
}
