// The wire shapes the browser reads. They are generated from `protocol/` (the one
// definition, in Rust) into `wire.ts` by `cargo test -p inspect-protocol --features ts`;
// this file only names the ones the web client uses.

export type {
  Actor,
  ApiTokenSummary,
  Artifact,
  BranchList,
  ChildSummary,
  Environment,
  EventPage,
  ImageBuild,
  ImageList,
  ImageScope,
  JsonValue,
  Me,
  Participant,
  Presence,
  QueuedPrompt,
  RepoSettings,
  Repository,
  RepositoryRef,
  SecretSummary,
  ServerMessage,
  SessionList,
  SessionState,
  SessionStatus,
  SessionSummary,
  SlackSettings,
  TimelineEvent,
} from "./wire";
