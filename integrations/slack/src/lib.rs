//! Slack as a front door: a team asks in a channel or a DM and gets the session's link, its
//! progress and the outcome in the same thread.
//!
//! The pure parts — whether a delivery is Slack's, what an event asks for, which repository
//! or environment a request is for, the classifier's request and answer, which images may
//! be taken, the messages' Block Kit — are plain functions tested natively. The Web API
//! client (`api`) sends requests with the Workers runtime's `fetch` and is shared by the
//! Worker and the SessionDO.

pub mod blocks;
pub mod classifier;
pub mod events;
pub mod files;
pub mod routing;
pub mod verify;

#[cfg(target_arch = "wasm32")]
pub mod api;
