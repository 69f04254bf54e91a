//! Fakes of the outside services the system talks to, each written from the vendor's own
//! documentation, SDK or server code and refusing what the service refuses: GitHub (REST,
//! OAuth, App tokens, git over smart HTTP), Google (OpenID Connect sign-in), Slack (the Web API, signed deliveries), Linear (the GraphQL operations the bot uses, checked against their schema; OAuth; signed deliveries), the
//! model (the OpenAI-compatible chat API), an MCP server (Streamable HTTP), and the cloud sandbox vendors (Daytona, E2B,
//! Modal, Vercel, OpenComputer, Kubernetes). `machine` and `cloud` are what the vendor
//! fakes share: a sandbox machine on this host, and the common HTTP plumbing.

pub mod cloud;
pub mod daytona;
pub mod e2b;
pub mod github;
pub mod google;
pub mod kubernetes;
pub mod linear;
pub mod machine;
pub mod mcp;
pub mod modal;
pub mod model;
pub mod oauth;
pub mod opencomputer;
pub mod push;
pub mod sentry;
pub mod slack;
pub mod vercel;
