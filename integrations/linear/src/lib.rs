//! Linear as a front door: assign an issue to the agent or mention it, and the issue is
//! worked in a session that reports in Linear's agent panel and ends with a pull request.
//!
//! The pure parts — whether a delivery is Linear's and fresh, what an event asks for,
//! which repository or environment an issue goes to, the prompt, the plan, the
//! activities, the OAuth forms, the state move — are plain functions tested natively. In
//! wasm: the GraphQL client and the app's tokens (`api`), the handlers the Worker
//! dispatches to (`bot`), and what the SessionDO posts to the agent panel (`panel`).

pub mod activity;
pub mod events;
pub mod issue;
pub mod oauth;
pub mod routing;
pub mod state;
pub mod verify;

#[cfg(target_arch = "wasm32")]
pub mod api;
#[cfg(target_arch = "wasm32")]
pub mod bot;
#[cfg(target_arch = "wasm32")]
pub mod panel;
