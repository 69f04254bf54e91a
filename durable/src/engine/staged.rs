//! Streamed parts told to clients at once and written a little later, many frames in one
//! commit.
//!
//! Every write ends in a durable commit that holds the messages sent after it, so a frame
//! that writes costs a commit: one streamed part per frame ran at about 30 % of the frames
//! the object can take without storage. A frame made only of streamed parts (a text part's
//! text so far, a tool call's state) is therefore *staged*: each part gets its sequence from
//! memory and its id from its key, goes to the clients, and waits here. The shell writes
//! everything staged in one statement in the turn of the first frame that finds it older
//! than [`staged_write_age`] (a second and a half to three: a session streaming a frame a
//! second shares each commit between two or three frames, and a part changed meanwhile is
//! written once, in its newest version); as soon as [`STAGED_MAX_PARTS`] wait; after
//! [`STAGED_BACKSTOP_MS`] when no frame comes; or before anything else touches the
//! session. Writing in a frame's turn rather than a timer's keeps the object's thread to
//! one event a frame: at a thousand sessions sending a batch a second, workerd's CPU a
//! batch fell by about a sixth against a write every frame (docs/benchmarks.md).
//! Nothing is lost on the way: the supervisor keeps each part's newest version until the
//! session acknowledges it, and the acknowledgement leaves only once the write is durable;
//! after a restart it resends what was not acknowledged.

use super::ingest::streamed_part;
use super::*;
use crate::store::{Store, StoreError, StoreResult};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::{frame_events, SandboxFrame, MAX_SANDBOX_FRAME_BYTES};
use inspect_protocol::session::TimelineEvent;
use serde_json::Value;

/// How old the first staged part is at least when a frame's turn writes the staging with
/// it ([`staged_write_age`]).
pub const STAGED_WRITE_MS: i64 = 1_500;
/// Up to this much older, drawn afresh for each staging: sessions started together (a
/// schedule's tick, a burst of prompts) and streaming at the same pace do not all write in
/// the same second, again and again.
pub const STAGED_WRITE_JITTER_MS: i64 = 1_500;
/// How long a staging waits at most when no frame comes to write it (the shell's timer:
/// set when a staging begins and none is set, so a steady stream, written by its frames,
/// runs about one every five seconds rather than one a write).
pub const STAGED_BACKSTOP_MS: u64 = 5_000;
// Old enough for frames a second apart to share a commit, young enough that a steady
// stream's parts are durable (and acknowledged) within a few seconds.
const _: () = assert!(STAGED_WRITE_MS > 1_000 && STAGED_WRITE_MS + STAGED_WRITE_JITTER_MS <= 3_000);
/// Frames that come within this of the last share one message to each client.
pub const TELL_TOGETHER_MS: u64 = 10;
/// More parts than this are written at once, without waiting for the timer.
pub const STAGED_MAX_PARTS: usize = 256;

/// The age at which a staging is written by the turn of a frame that finds it, from `random`
/// (any number; the shell passes a random one): between [`STAGED_WRITE_MS`] and that plus
/// [`STAGED_WRITE_JITTER_MS`].
pub fn staged_write_age(random: u32) -> i64 {
    STAGED_WRITE_MS + i64::from(random) % (STAGED_WRITE_JITTER_MS + 1)
}

/// What is staged: the newest version of each part, with its sequence and id.
#[derive(Debug, Default)]
pub struct Staged {
    /// The sequence the next staged part gets.
    next_seq: Option<i64>,
    /// The sandbox whose frames are staged (read with the first one).
    sandbox_id: Option<String>,
    /// One row per part key, in the order of their sequences.
    rows: Vec<StagedRow>,
    /// When the sandbox was last active.
    active_at: Option<i64>,
    /// When a frame's turn writes this staging (drawn with its first due check).
    write_at: Option<i64>,
}

#[derive(Debug)]
struct StagedRow {
    seq: i64,
    id: String,
    part_key: String,
    kind: String,
    message_id: Option<String>,
    timestamp: i64,
    data: String,
    /// The supervisor's ack id of this version. An older version's is never sent: the
    /// supervisor keeps only a part's newest version waiting, so acknowledging that one is
    /// enough (and a part streamed token by token for seconds acknowledges once).
    ack_id: Option<String>,
}

impl Staged {
    /// Nothing waits to be written.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty() && self.active_at.is_none()
    }

    /// Parts waiting.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether the frame staged at `now` writes the staging in its turn: it is older than
    /// its write age ([`staged_write_age`] from `random`, drawn once, at the staging's
    /// first check, so the shell draws randomness once a staging), or
    /// [`STAGED_MAX_PARTS`] parts wait.
    pub fn due(&mut self, now: i64, random: impl FnOnce() -> u32) -> bool {
        let write_at = *self
            .write_at
            .get_or_insert_with(|| now + staged_write_age(random()));
        self.rows.len() >= STAGED_MAX_PARTS || now >= write_at
    }

    /// Where the next staging starts once this one is written: the same sandbox and the
    /// sequence after this one's last part, which is what its first read would find. Good
    /// only while nothing else runs a statement on the session; the shell forgets it
    /// ([`Staged::forget_start`]) before anything else does.
    pub fn successor(&self) -> Staged {
        Staged {
            next_seq: self.next_seq,
            sandbox_id: self.sandbox_id.clone(),
            ..Staged::default()
        }
    }

    /// Forgets where the staging starts (another statement may add events or change the
    /// sandbox): the next staged frame reads them again.
    pub fn forget_start(&mut self) {
        if self.rows.is_empty() {
            self.next_seq = None;
            self.sandbox_id = None;
        }
    }

    /// What a staging starts from, read once with its first frame in one statement: the
    /// current sandbox (its frames are the ones staged; `None` when there is none) and the
    /// next sequence, one past the newest the timeline has ever given (a removed newest
    /// event's number is not given again).
    fn begin(&mut self, store: &impl Store) -> StoreResult<Option<String>> {
        if let (Some(id), Some(_)) = (&self.sandbox_id, self.next_seq) {
            return Ok(Some(id.clone()));
        }
        let row = store
            .query(
                "SELECT (SELECT sandbox_id FROM sandbox WHERE id = 1),
                        MAX(COALESCE((SELECT MAX(seq) FROM events), 0),
                            COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0)) + 1",
                &[],
            )?
            .into_iter()
            .next()
            .ok_or_else(|| StoreError("no next sequence".into()))?;
        let mut c = crate::store::Cols::new(row);
        let sandbox_id = c.opt_string()?;
        let seq = c.i64()?;
        self.next_seq.get_or_insert(seq);
        Ok(self.sandbox_id.clone().or(sandbox_id))
    }

    /// Stages one part's newest version under the next sequence (its earlier staged
    /// version, if any, is replaced).
    fn stage(&mut self, part: timeline::Part, ack_id: Option<String>, now: i64) -> TimelineEvent {
        let id = ids::part_event_id(&part.part_key);
        let seq = self.next_seq.unwrap_or(1);
        self.next_seq = Some(seq + 1);
        self.rows.retain(|r| r.part_key != part.part_key);
        let mut data = part.data;
        data.remove("partKey");
        self.rows.push(StagedRow {
            seq,
            id: id.clone(),
            part_key: part.part_key,
            kind: part.kind.clone(),
            message_id: part.message_id.clone(),
            timestamp: now,
            data: serde_json::to_string(&data).unwrap_or_else(|_| "{}".into()),
            ack_id,
        });
        TimelineEvent {
            id,
            seq,
            kind: part.kind,
            timestamp: now,
            message_id: part.message_id,
            data,
        }
    }
}

impl<S: Store> Session<'_, S> {
    /// Takes a frame made only of streamed parts from the current sandbox without writing:
    /// each part gets its sequence and id, is told to the clients (the effects) and waits in
    /// `staged` for [`Session::write_staged`]. `None` when the frame is anything else, bad
    /// frames included: the caller writes what is staged, then hands the frame to
    /// [`Session::on_sandbox_frame`].
    pub fn stage_sandbox_frame(
        &self,
        text: &str,
        now: i64,
        staged: &mut Staged,
    ) -> Option<Effects> {
        if text.len() > MAX_SANDBOX_FRAME_BYTES {
            return None;
        }
        let split = frame_events(text).ok()?;
        let batch = split.batch;
        let mut frames = Vec::with_capacity(split.events.len());
        for raw in split.events {
            let frame: SandboxFrame = serde_json::from_str(raw).ok()?;
            if !frame.event.is_streamed_part() {
                return None;
            }
            frames.push(frame);
        }
        // The one read comes first: if it fails, nothing is staged or told and the frame
        // goes the usual way.
        let current = staged.begin(self.store).ok()??;
        if frames.is_empty() || frames.iter().any(|f| f.sandbox_id != current) {
            return None;
        }
        // A batch's parts: the newest version of each, in the order they last changed.
        let mut parts: Vec<(timeline::Part, Option<String>)> = Vec::with_capacity(frames.len());
        for frame in &frames {
            let part = streamed_part(frame)?;
            parts.retain(|(p, _)| p.part_key != part.part_key);
            parts.push((part, frame.ack_id.clone()));
        }
        let mut fx = Effects::none();
        for (part, ack_id) in parts {
            let event = staged.stage(part, ack_id, now);
            fx.broadcast(ServerMessage::SandboxEvent { event });
        }
        staged.sandbox_id = Some(current);
        staged.active_at = Some(staged.active_at.map_or(now, |t| t.max(now)));
        if batch {
            fx.batch_events();
        }
        Some(fx)
    }

    /// Writes what is staged, in one statement for the parts, and returns the ack ids that
    /// may now be sent (the shell sends them after the write, so they leave once it is
    /// durable).
    pub fn write_staged(&self, staged: Staged) -> EngineResult<Vec<String>> {
        let Staged {
            rows, active_at, ..
        } = staged;
        let acks = rows.iter().filter_map(|r| r.ack_id.clone()).collect();
        self.store
            .atomically(|| {
                if !rows.is_empty() {
                    self.write_rows(rows)?;
                }
                if let Some(at) = active_at {
                    super::deadlines::record_activity(self.store, at)?;
                }
                Ok(())
            })
            .map_err(internal)?;
        Ok(acks)
    }

    fn write_rows(&self, rows: Vec<StagedRow>) -> StoreResult<()> {
        {
            let rows: Vec<Value> = rows
                .into_iter()
                .map(|r| {
                    Value::Array(vec![
                        r.seq.into(),
                        r.id.into(),
                        r.kind.into(),
                        r.message_id.map_or(Value::Null, Value::String),
                        r.timestamp.into(),
                        r.data.into(),
                        r.part_key.into(),
                    ])
                })
                .collect();
            let rows = Value::Array(rows).to_string();
            self.store.execute(
                "INSERT INTO events (seq, id, kind, message_id, timestamp, data, part_key)
                     SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'),
                            json_extract(value, '$[2]'), json_extract(value, '$[3]'),
                            json_extract(value, '$[4]'), json_extract(value, '$[5]'),
                            json_extract(value, '$[6]')
                     FROM json_each(?) WHERE true ORDER BY key
                     ON CONFLICT(part_key) DO UPDATE SET seq = excluded.seq, id = excluded.id,
                         kind = excluded.kind, message_id = excluded.message_id,
                         timestamp = excluded.timestamp, data = excluded.data",
                &[rows.into()],
            )
        }
    }
}
