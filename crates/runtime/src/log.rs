//! Writes [`LogLine`]s from the Worker and the SessionDO to the runtime's console (what
//! `wrangler tail` and `wrangler dev` show), at the line's level.

pub use inspect_protocol::log::{Level, LogLine};

pub fn emit(line: LogLine) {
    let text = line.to_json();
    match line.level {
        Level::Debug | Level::Info => worker::console_log!("{text}"),
        Level::Warn => worker::console_warn!("{text}"),
        Level::Error => worker::console_error!("{text}"),
    }
}
