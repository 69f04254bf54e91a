//! Slack as a front door: a team asks in a channel or a DM and gets the session's link, its
//! progress and the outcome in the same thread.
//!
//! The pure parts — whether a delivery is Slack's, what an event asks for, which repository
//! or environment a request is for, the classifier's request and answer, which images may
//! be taken, the messages' Block Kit — are plain functions tested natively. In wasm: the
//! Web API client (`api`), the bot's handlers the Worker dispatches to (`bot`), and what
//! the SessionDO posts to a thread (`thread`).

pub mod blocks;
pub mod classifier;
pub mod command;
pub mod events;
pub mod files;
pub mod interaction;
pub mod routing;
pub mod verify;

#[cfg(target_arch = "wasm32")]
pub mod api;
#[cfg(target_arch = "wasm32")]
pub mod bot;
#[cfg(target_arch = "wasm32")]
pub mod thread;
