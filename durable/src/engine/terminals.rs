//! Terminals from the session's side: which are open, who opened them, their size; input
//! and resizes from subscribed clients on to the sandbox, output from the sandbox on to
//! the clients (a replay to the one that asked). Nothing of a terminal's bytes is stored.
//! A terminal ends with its shell, when someone closes it, or when the sandbox stops.

use super::{ids, internal, timeline, EngineResult, Session};
use crate::engine::Effects;
use crate::store::{Cols, Store};
use inspect_protocol::client::ServerMessage;
use inspect_protocol::sandbox::SandboxCommand;
use inspect_protocol::session::Participant;
use inspect_protocol::terminal::{
    size_ok, OpenTerminalRequest, TerminalInfo, MAX_COLS, MAX_INPUT_BYTES, MAX_OPEN_TERMINALS,
    MAX_ROWS,
};
use inspect_protocol::{ApiError, ErrorCode};
use serde_json::{Map, Value};

const COLUMNS: &str = "id, opened_by_name, opened_at, cols, rows, closed_at, exit_code";

fn read(row: crate::store::Row) -> crate::store::StoreResult<TerminalInfo> {
    let mut c = Cols::new(row);
    Ok(TerminalInfo {
        id: c.string()?,
        opened_by: c.string()?,
        opened_at: c.i64()?,
        cols: c.i64()? as u16,
        rows: c.i64()? as u16,
        closed_at: c.opt_i64()?,
        exit_code: c.opt_i64()?.map(|v| v as i32),
    })
}

fn bad_size(cols: u16, rows: u16) -> ApiError {
    ApiError::bad_request(format!(
        "{cols}×{rows} is not a terminal size: 1 to {MAX_COLS} columns and 1 to {MAX_ROWS} rows"
    ))
}

impl<S: Store> Session<'_, S> {
    /// Opens a terminal in the running sandbox for `by`: the sandbox starts a shell, every
    /// client hears of it, and the timeline says who opened it.
    pub fn open_terminal(
        &self,
        by: &Participant,
        req: &OpenTerminalRequest,
        now: i64,
    ) -> EngineResult<(TerminalInfo, Effects)> {
        if !size_ok(req.cols, req.rows) {
            return Err(bad_size(req.cols, req.rows));
        }
        let live = self.sandbox_row()?.is_some_and(|r| r.is_live());
        if !live || !self.sandbox_connected()? {
            return Err(ApiError::conflict(
                "the session's sandbox is not running; send a prompt to start it, then open a terminal",
            ));
        }
        if self.open_terminals()?.len() >= MAX_OPEN_TERMINALS {
            return Err(ApiError::conflict(format!(
                "{MAX_OPEN_TERMINALS} terminals are open in this session; close one first"
            )));
        }
        let info = TerminalInfo {
            id: ids::new_id("term"),
            opened_by: by.name.clone(),
            opened_at: now,
            cols: req.cols,
            rows: req.rows,
            closed_at: None,
            exit_code: None,
        };
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "INSERT INTO terminals (id, opened_by, opened_by_name, opened_at, cols, rows) VALUES (?, ?, ?, ?, ?, ?)",
                    &[
                        info.id.as_str().into(),
                        by.participant_id.as_str().into(),
                        info.opened_by.as_str().into(),
                        now.into(),
                        i64::from(info.cols).into(),
                        i64::from(info.rows).into(),
                    ],
                )?;
                timeline::append(self.store, "terminal", None, said(&info.id, "opened", &by.name), now)
            })
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::TerminalOpen {
            terminal_id: info.id.clone(),
            cols: info.cols,
            rows: info.rows,
        });
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::TerminalOpened {
            terminal: info.clone(),
        });
        Ok((info, fx))
    }

    /// Every terminal of the session, newest first.
    pub fn terminals(&self) -> EngineResult<Vec<TerminalInfo>> {
        self.store
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM terminals ORDER BY opened_at DESC, id DESC LIMIT 100"
                ),
                &[],
            )
            .map_err(internal)?
            .into_iter()
            .map(read)
            .collect::<Result<_, _>>()
            .map_err(internal)
    }

    fn open_terminals(&self) -> EngineResult<Vec<String>> {
        Ok(self
            .store
            .query("SELECT id FROM terminals WHERE closed_at IS NULL", &[])
            .map_err(internal)?
            .into_iter()
            .filter_map(|r| r.into_iter().next().and_then(|v| v.into_string()))
            .collect())
    }

    fn terminal_open(&self, id: &str) -> EngineResult<bool> {
        Ok(self
            .store
            .scalar(
                "SELECT COUNT(*) FROM terminals WHERE id = ? AND closed_at IS NULL",
                &[id.into()],
            )
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0)
            > 0)
    }

    fn require_open(&self, id: &str) -> EngineResult<()> {
        if self.terminal_open(id)? {
            return Ok(());
        }
        Err(ApiError::new(
            ErrorCode::NotFound,
            format!("no open terminal {id} in this session"),
        ))
    }

    /// Closes a terminal (someone asked, or its shell ended with `exit_code`).
    pub fn close_terminal(
        &self,
        id: &str,
        by: Option<&Participant>,
        exit_code: Option<i32>,
        now: i64,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if !self.terminal_open(id)? {
            if by.is_some() {
                self.require_open(id)?;
            }
            return Ok(fx);
        }
        let who = by.map(|p| p.name.as_str()).unwrap_or("");
        let event = self
            .store
            .atomically(|| {
                self.store.execute(
                    "UPDATE terminals SET closed_at = ?, exit_code = ? WHERE id = ?",
                    &[now.into(), exit_code.map(i64::from).into(), id.into()],
                )?;
                let mut data = said(id, if by.is_some() { "closed" } else { "exited" }, who);
                if let Some(code) = exit_code {
                    data.insert("exitCode".into(), Value::from(code));
                }
                timeline::append(self.store, "terminal", None, data, now)
            })
            .map_err(internal)?;
        if by.is_some() {
            fx.to_sandbox.push(SandboxCommand::TerminalClose {
                terminal_id: id.to_owned(),
            });
        }
        fx.broadcast(ServerMessage::SandboxEvent { event });
        fx.broadcast(ServerMessage::TerminalClosed {
            terminal_id: id.to_owned(),
            exit_code,
        });
        Ok(fx)
    }

    /// The sandbox stopped: its terminals went with it.
    pub(crate) fn terminals_gone(&self, now: i64) -> crate::store::StoreResult<()> {
        self.store.execute(
            "UPDATE terminals SET closed_at = ? WHERE closed_at IS NULL",
            &[now.into()],
        )
    }

    /// Keys for a terminal, from a subscribed client.
    pub(crate) fn terminal_input(&self, id: &str, data: String, now: i64) -> EngineResult<Effects> {
        if data.len() > MAX_INPUT_BYTES {
            return Err(ApiError::new(
                ErrorCode::PayloadTooLarge,
                format!("terminal input is sent in pieces of at most {MAX_INPUT_BYTES} bytes"),
            ));
        }
        self.require_open(id)?;
        // Someone at work in the sandbox keeps it from counting as idle: written at most
        // once a minute, so keystrokes are not held for writes.
        let last = self
            .store
            .scalar("SELECT last_activity FROM sandbox WHERE id = 1", &[])
            .map_err(internal)?
            .and_then(|v| v.as_i64())
            .unwrap_or(0);
        if now - last > 60_000 {
            self.sandbox_active(now)?;
        }
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::TerminalInput {
            terminal_id: id.to_owned(),
            data,
        });
        Ok(fx)
    }

    pub(crate) fn terminal_resize(&self, id: &str, cols: u16, rows: u16) -> EngineResult<Effects> {
        if !size_ok(cols, rows) {
            return Err(bad_size(cols, rows));
        }
        self.require_open(id)?;
        self.store
            .execute(
                "UPDATE terminals SET cols = ?, rows = ? WHERE id = ?",
                &[i64::from(cols).into(), i64::from(rows).into(), id.into()],
            )
            .map_err(internal)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::TerminalResize {
            terminal_id: id.to_owned(),
            cols,
            rows,
        });
        fx.broadcast(ServerMessage::TerminalResized {
            terminal_id: id.to_owned(),
            cols,
            rows,
        });
        Ok(fx)
    }

    /// A client (re)opened a terminal: the sandbox sends it the scroll-back.
    pub(crate) fn terminal_attach(&self, ws_id: &str, id: &str) -> EngineResult<Effects> {
        self.require_open(id)?;
        let mut fx = Effects::none();
        fx.to_sandbox.push(SandboxCommand::TerminalReplay {
            terminal_id: id.to_owned(),
            client: ws_id.to_owned(),
        });
        Ok(fx)
    }

    /// A terminal's output from the sandbox: to every client, or its replay to one.
    pub(crate) fn terminal_output(
        &self,
        id: &str,
        data: &str,
        client: Option<&str>,
    ) -> EngineResult<Effects> {
        let mut fx = Effects::none();
        if !self.terminal_open(id)? {
            return Ok(fx);
        }
        let message = ServerMessage::TerminalOutput {
            terminal_id: id.to_owned(),
            data: data.to_owned(),
            replay: client.is_some(),
        };
        match client {
            Some(ws) => fx.to(ws, message),
            None => fx.broadcast(message),
        };
        Ok(fx)
    }
}

fn said(id: &str, action: &str, who: &str) -> Map<String, Value> {
    let mut data = Map::new();
    data.insert("terminalId".into(), Value::String(id.into()));
    data.insert("action".into(), Value::String(action.into()));
    if !who.is_empty() {
        data.insert("by".into(), Value::String(who.into()));
    }
    data
}
