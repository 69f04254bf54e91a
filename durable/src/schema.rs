//! The SessionDO's SQLite schema, versioned. Each migration runs once, in order, and the
//! version reached is recorded in `schema_version`, so an object woken after an upgrade
//! brings its own database forward.

use crate::store::{Store, StoreResult};

/// Each entry is one migration; never edit a released one, append a new one.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 1: the first schema.
    r#"
    CREATE TABLE IF NOT EXISTS health_probe (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        probes INTEGER NOT NULL
    );
    "#,
    // 2: the session, its people, its prompts, its timeline.
    r#"
    CREATE TABLE session (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        session_id TEXT NOT NULL,
        title TEXT,
        status TEXT NOT NULL,
        repositories TEXT NOT NULL,
        branch_name TEXT,
        model TEXT,
        reasoning_effort TEXT,
        created_by TEXT NOT NULL,
        sandbox_status TEXT NOT NULL DEFAULT 'none',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE participants (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        email TEXT,
        avatar TEXT,
        role TEXT NOT NULL,
        presence_status TEXT NOT NULL DEFAULT 'active',
        joined_at INTEGER NOT NULL,
        last_seen INTEGER NOT NULL
    );
    CREATE TABLE ws_tokens (
        token_hash TEXT PRIMARY KEY,
        participant_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        author_id TEXT NOT NULL,
        content TEXT NOT NULL,
        model TEXT,
        reasoning_effort TEXT,
        attachments TEXT,
        status TEXT NOT NULL,
        client_request_id TEXT UNIQUE,
        error TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        completed_at INTEGER
    );
    CREATE INDEX messages_by_status ON messages (status, seq);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        message_id TEXT,
        timestamp INTEGER NOT NULL,
        data TEXT NOT NULL
    );
    CREATE TABLE artifacts (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        url TEXT,
        metadata TEXT,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE sandbox (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        sandbox_id TEXT,
        status TEXT NOT NULL,
        token_hash TEXT,
        updated_at INTEGER NOT NULL
    );
    CREATE TABLE ws_client_mapping (
        ws_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        participant_id TEXT,
        client_id TEXT,
        connected_at INTEGER NOT NULL,
        subscribed_at INTEGER
    );
    CREATE INDEX ws_by_participant ON ws_client_mapping (participant_id);
    CREATE TABLE alarm_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        next_at INTEGER
    );
    "#,
    // 3: sandboxes: spawn tickets, liveness; coalescing keys on the timeline; acks seen.
    r#"
    ALTER TABLE sandbox ADD COLUMN spawned_at INTEGER;
    ALTER TABLE sandbox ADD COLUMN connected_at INTEGER;
    ALTER TABLE sandbox ADD COLUMN last_heartbeat INTEGER;
    ALTER TABLE sandbox ADD COLUMN error TEXT;
    ALTER TABLE session ADD COLUMN origin TEXT;
    ALTER TABLE events ADD COLUMN part_key TEXT;
    CREATE UNIQUE INDEX events_by_part_key ON events (part_key);
    CREATE TABLE sandbox_acks (
        ack_id TEXT PRIMARY KEY,
        seen_at INTEGER NOT NULL
    );
    "#,
    // 4: what a session asks of its sandbox; the tunnel URLs its sandbox got.
    r#"
    ALTER TABLE session ADD COLUMN sandbox_settings TEXT;
    ALTER TABLE sandbox ADD COLUMN tunnel_urls TEXT;
    "#,
    // 5: when the sandbox's socket went, for the reconnect grace.
    r#"
    ALTER TABLE sandbox ADD COLUMN disconnected_at INTEGER;
    "#,
    // 6: activity for the inactivity stop; failed spawns for giving up on retries.
    r#"
    ALTER TABLE sandbox ADD COLUMN last_activity INTEGER;
    CREATE TABLE spawn_failures (
        at INTEGER NOT NULL
    );
    "#,
    // 7: snapshots of the sandbox's filesystem, newest last.
    r#"
    CREATE TABLE snapshots (
        snapshot_id TEXT PRIMARY KEY,
        sandbox_id TEXT NOT NULL,
        runtime_version TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    );
    "#,
    // 8: the deployment's idle timeout, recorded when the session was made.
    r#"
    ALTER TABLE session ADD COLUMN idle_timeout_ms INTEGER;
    "#,
    // 9: the environment a session targets (its secrets layer over the repositories').
    r#"
    ALTER TABLE session ADD COLUMN environment_id TEXT;
    "#,
    // 10: where a prompt's outcome is reported; artifacts updated in place by a key (a
    // pull request is one artifact however often its state changes).
    r#"
    ALTER TABLE messages ADD COLUMN callback TEXT;
    ALTER TABLE artifacts ADD COLUMN artifact_key TEXT;
    ALTER TABLE artifacts ADD COLUMN updated_at INTEGER;
    CREATE UNIQUE INDEX artifacts_by_key ON artifacts (artifact_key);
    "#,
    // 11: the deployment's prompt rate, recorded when the session was made.
    r#"
    ALTER TABLE session ADD COLUMN prompts_per_minute INTEGER;
    CREATE INDEX messages_by_author ON messages (author_id, created_at);
    "#,
    // 12: the environment's name, copied when the session was made.
    r#"
    ALTER TABLE session ADD COLUMN environment_name TEXT;
    "#,
    // 13: child sessions: the parent of this one, how deep it is, the children it made.
    r#"
    ALTER TABLE session ADD COLUMN parent_session_id TEXT;
    ALTER TABLE session ADD COLUMN depth INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE children (
        session_id TEXT PRIMARY KEY,
        title TEXT,
        created_at INTEGER NOT NULL
    );
    "#,
    // 14: prompt attachments (images from Slack, files from the API), kept in 1 MiB chunks
    // (a value in the object's SQLite holds at most 2 MB).
    r#"
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE attachment_chunks (
        attachment_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (attachment_id, idx)
    );
    "#,
    // 15: the vendor's own id of every sandbox the session had (a vendor that names
    // sandboxes itself is asked by it, and deleting the session reaches each).
    r#"
    CREATE TABLE vendor_sandboxes (
        sandbox_id TEXT PRIMARY KEY,
        vendor_id TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
    );
    "#,
    // 16: when the sandbox's workspace first became ready (with it, or with the sandbox it
    // resumes): one given up on after that has work worth resuming; one that never did has
    // nothing.
    r#"
    ALTER TABLE sandbox ADD COLUMN ready_at INTEGER;
    "#,
    // 17: the deployment's budget for a sandbox to become ready, recorded when the session
    // was made; what the provider last said of a sandbox on its way.
    r#"
    ALTER TABLE session ADD COLUMN ready_timeout_ms INTEGER;
    ALTER TABLE sandbox ADD COLUMN progress TEXT;
    "#,
    // 18: the automation and run that started the session (JSON), when one did.
    r#"
    ALTER TABLE session ADD COLUMN automation TEXT;
    "#,
    // 19: the workspace's change, as the sandbox last captured it (each file's diff kept
    // beside its listing, read one at a time).
    r#"
    CREATE TABLE change_repos (
        repo TEXT PRIMARY KEY,
        base TEXT NOT NULL,
        more_files INTEGER NOT NULL,
        additions INTEGER NOT NULL,
        deletions INTEGER NOT NULL,
        error TEXT,
        captured_at INTEGER NOT NULL
    );
    CREATE TABLE change_files (
        repo TEXT NOT NULL,
        idx INTEGER NOT NULL,
        path TEXT NOT NULL,
        file TEXT NOT NULL,
        patch TEXT,
        PRIMARY KEY (repo, idx)
    );
    CREATE INDEX change_files_by_path ON change_files (repo, path);
    "#,
    // 20: terminals people opened in the sandbox (their bytes are never stored).
    r#"
    CREATE TABLE terminals (
        id TEXT PRIMARY KEY,
        opened_by TEXT NOT NULL,
        opened_by_name TEXT NOT NULL,
        opened_at INTEGER NOT NULL,
        cols INTEGER NOT NULL,
        rows INTEGER NOT NULL,
        closed_at INTEGER,
        exit_code INTEGER
    );
    "#,
    // 21: where the sandbox's editor is reached (JSON), and the one-time links people got
    // to it (their tokens hashed).
    r#"
    ALTER TABLE sandbox ADD COLUMN editor TEXT;
    CREATE TABLE editor_links (
        token_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL
    );
    "#,
    // 22: the managed skill revisions the session pinned (JSON).
    r#"
    ALTER TABLE session ADD COLUMN skills TEXT;
    "#,
    // 23: the MCP servers the session's agent is given (JSON, secret references only).
    r#"
    ALTER TABLE session ADD COLUMN mcp TEXT;
    "#,
    // 24: when the vendor was last asked to keep the sandbox of a running turn, and when
    // its links were last signed anew.
    r#"
    ALTER TABLE sandbox ADD COLUMN extended_at INTEGER;
    ALTER TABLE sandbox ADD COLUMN links_at INTEGER;
    "#,
    // 25: each time the provider had no room for the session's sandbox since it last had
    // one, and how many sessions waited longer (how long to wait before asking again grows
    // with the first, and is the longest while any of the second wait).
    r#"
    CREATE TABLE capacity_waits (
        at INTEGER NOT NULL,
        ahead INTEGER NOT NULL DEFAULT 0
    );
    "#,
    // 26: "Try N ways": the group of attempts a child belongs to, and each group's prompt
    // and the attempt chosen.
    r#"
    ALTER TABLE children ADD COLUMN attempt TEXT;
    CREATE TABLE attempt_groups (
        grp TEXT PRIMARY KEY,
        prompt TEXT NOT NULL,
        chosen TEXT,
        created_at INTEGER NOT NULL
    );
    "#,
    // 27: where the sandbox's desktop is reached (JSON: its view-only and control servers),
    // and which service a person's one-time link opens (the editor, or the desktop to
    // watch or to control).
    r#"
    ALTER TABLE sandbox ADD COLUMN desktop TEXT;
    ALTER TABLE editor_links ADD COLUMN service TEXT NOT NULL DEFAULT 'editor';
    "#,
    // 28: an event's id without an index of its own. Nothing looks an event up by its id,
    // and ids are unique as made (random, or a digest of the part's unique key); the index
    // only cost each commit a page per event (a random place in it): 24 → 15 pages written
    // a commit of ten tool calls into 2,000 events. SQLite drops such a constraint only
    // with its table, so the table is made again, rows and sequences kept.
    r#"
    CREATE TABLE events_next (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        message_id TEXT,
        timestamp INTEGER NOT NULL,
        data TEXT NOT NULL,
        part_key TEXT
    );
    INSERT INTO events_next (seq, id, kind, message_id, timestamp, data, part_key)
        SELECT seq, id, kind, message_id, timestamp, data, part_key FROM events ORDER BY seq;
    DROP TABLE events;
    ALTER TABLE events_next RENAME TO events;
    CREATE UNIQUE INDEX events_by_part_key ON events (part_key);
    "#,
];

/// The schema every migration above makes, written as it ends up: what a new session's
/// object runs instead of the migrations one by one (each `ALTER TABLE` makes SQLite read
/// the whole schema again; a profile of 1,000 new sessions found a quarter of the runtime's
/// time in them). A test checks it makes the same tables, columns and indexes; a new
/// migration changes it too.
pub(crate) const FRESH: &str = r#"
    CREATE TABLE health_probe (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        probes INTEGER NOT NULL
    );
    CREATE TABLE session (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        session_id TEXT NOT NULL,
        title TEXT,
        status TEXT NOT NULL,
        repositories TEXT NOT NULL,
        branch_name TEXT,
        model TEXT,
        reasoning_effort TEXT,
        created_by TEXT NOT NULL,
        sandbox_status TEXT NOT NULL DEFAULT 'none',
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        origin TEXT,
        sandbox_settings TEXT,
        idle_timeout_ms INTEGER,
        environment_id TEXT,
        prompts_per_minute INTEGER,
        environment_name TEXT,
        parent_session_id TEXT,
        depth INTEGER NOT NULL DEFAULT 0,
        ready_timeout_ms INTEGER,
        automation TEXT,
        skills TEXT,
        mcp TEXT
    );
    CREATE TABLE participants (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        email TEXT,
        avatar TEXT,
        role TEXT NOT NULL,
        presence_status TEXT NOT NULL DEFAULT 'active',
        joined_at INTEGER NOT NULL,
        last_seen INTEGER NOT NULL
    );
    CREATE TABLE ws_tokens (
        token_hash TEXT PRIMARY KEY,
        participant_id TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
    );
    CREATE TABLE messages (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL UNIQUE,
        author_id TEXT NOT NULL,
        content TEXT NOT NULL,
        model TEXT,
        reasoning_effort TEXT,
        attachments TEXT,
        status TEXT NOT NULL,
        client_request_id TEXT UNIQUE,
        error TEXT,
        created_at INTEGER NOT NULL,
        started_at INTEGER,
        completed_at INTEGER,
        callback TEXT
    );
    CREATE INDEX messages_by_status ON messages (status, seq);
    CREATE INDEX messages_by_author ON messages (author_id, created_at);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        id TEXT NOT NULL,
        kind TEXT NOT NULL,
        message_id TEXT,
        timestamp INTEGER NOT NULL,
        data TEXT NOT NULL,
        part_key TEXT
    );
    CREATE UNIQUE INDEX events_by_part_key ON events (part_key);
    CREATE TABLE artifacts (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        url TEXT,
        metadata TEXT,
        created_at INTEGER NOT NULL,
        artifact_key TEXT,
        updated_at INTEGER
    );
    CREATE UNIQUE INDEX artifacts_by_key ON artifacts (artifact_key);
    CREATE TABLE sandbox (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        sandbox_id TEXT,
        status TEXT NOT NULL,
        token_hash TEXT,
        updated_at INTEGER NOT NULL,
        spawned_at INTEGER,
        connected_at INTEGER,
        last_heartbeat INTEGER,
        error TEXT,
        tunnel_urls TEXT,
        disconnected_at INTEGER,
        last_activity INTEGER,
        ready_at INTEGER,
        progress TEXT,
        editor TEXT,
        extended_at INTEGER,
        links_at INTEGER,
        desktop TEXT
    );
    CREATE TABLE ws_client_mapping (
        ws_id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        participant_id TEXT,
        client_id TEXT,
        connected_at INTEGER NOT NULL,
        subscribed_at INTEGER
    );
    CREATE INDEX ws_by_participant ON ws_client_mapping (participant_id);
    CREATE TABLE alarm_state (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        next_at INTEGER
    );
    CREATE TABLE sandbox_acks (
        ack_id TEXT PRIMARY KEY,
        seen_at INTEGER NOT NULL
    );
    CREATE TABLE spawn_failures (
        at INTEGER NOT NULL
    );
    CREATE TABLE capacity_waits (
        at INTEGER NOT NULL,
        ahead INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE snapshots (
        snapshot_id TEXT PRIMARY KEY,
        sandbox_id TEXT NOT NULL,
        runtime_version TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE children (
        session_id TEXT PRIMARY KEY,
        title TEXT,
        created_at INTEGER NOT NULL,
        attempt TEXT
    );
    CREATE TABLE attempt_groups (
        grp TEXT PRIMARY KEY,
        prompt TEXT NOT NULL,
        chosen TEXT,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE attachments (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        mime_type TEXT NOT NULL,
        bytes INTEGER NOT NULL,
        created_at INTEGER NOT NULL
    );
    CREATE TABLE attachment_chunks (
        attachment_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        data BLOB NOT NULL,
        PRIMARY KEY (attachment_id, idx)
    );
    CREATE TABLE vendor_sandboxes (
        sandbox_id TEXT PRIMARY KEY,
        vendor_id TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
    );
    CREATE TABLE change_repos (
        repo TEXT PRIMARY KEY,
        base TEXT NOT NULL,
        more_files INTEGER NOT NULL,
        additions INTEGER NOT NULL,
        deletions INTEGER NOT NULL,
        error TEXT,
        captured_at INTEGER NOT NULL
    );
    CREATE TABLE change_files (
        repo TEXT NOT NULL,
        idx INTEGER NOT NULL,
        path TEXT NOT NULL,
        file TEXT NOT NULL,
        patch TEXT,
        PRIMARY KEY (repo, idx)
    );
    CREATE INDEX change_files_by_path ON change_files (repo, path);
    CREATE TABLE terminals (
        id TEXT PRIMARY KEY,
        opened_by TEXT NOT NULL,
        opened_by_name TEXT NOT NULL,
        opened_at INTEGER NOT NULL,
        cols INTEGER NOT NULL,
        rows INTEGER NOT NULL,
        closed_at INTEGER,
        exit_code INTEGER
    );
    CREATE TABLE editor_links (
        token_hash TEXT PRIMARY KEY,
        user_id TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        service TEXT NOT NULL DEFAULT 'editor'
    );
"#;

pub fn current_version() -> i64 {
    MIGRATIONS.len() as i64
}

/// Brings the database to the newest schema. Idempotent.
/// Whether this object's database holds a schema: a session was made here (`/init`). An
/// object addressed by anything else keeps an empty database.
pub fn exists(store: &impl Store) -> StoreResult<bool> {
    Ok(store
        .scalar(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'",
            &[],
        )?
        .and_then(|v| v.as_i64())
        .unwrap_or(0)
        > 0)
}

pub fn migrate(store: &impl Store) -> StoreResult<i64> {
    if !exists(store)? {
        store.execute(
            "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)",
            &[],
        )?;
    }
    bring_forward(store)
}

/// [`migrate`] where the version table is known to exist ([`exists`] said so). Reads only,
/// unless a migration is pending: a statement that writes, even one that changes nothing
/// (`CREATE TABLE IF NOT EXISTS`), costs the object a commit, and an object woken from
/// hibernation would pay it before anything it sends could leave.
pub fn bring_forward(store: &impl Store) -> StoreResult<i64> {
    let have = store
        .scalar("SELECT version FROM schema_version WHERE id = 1", &[])?
        .and_then(|v| v.as_i64())
        .unwrap_or(0);
    if have >= current_version() {
        return Ok(current_version());
    }
    // Every pending migration (for a new object, the schema as they leave it) and the
    // version reached, as one script in one unit.
    let script = match have {
        0 => FRESH.to_owned(),
        _ => MIGRATIONS[have.max(0) as usize..].join(";\n"),
    };
    store.atomically(|| store.execute_script(&with_version(script)))?;
    Ok(current_version())
}

/// Makes the whole schema in a database known to be empty ([`exists`] said so): one
/// script, the version table with it, so a new session's object spends one call on it.
pub fn create(store: &impl Store) -> StoreResult<i64> {
    let script = format!(
        "CREATE TABLE schema_version (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL);\n{FRESH}"
    );
    store.atomically(|| store.execute_script(&with_version(script)))?;
    Ok(current_version())
}

/// `script` followed by the statement recording the version it reaches.
fn with_version(mut script: String) -> String {
    script.push_str(&format!(
        ";\nINSERT INTO schema_version (id, version) VALUES (1, {}) ON CONFLICT(id) DO UPDATE SET version = excluded.version;",
        current_version()
    ));
    script
}
