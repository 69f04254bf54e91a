// The wire shapes the browser reads. They mirror `protocol/` (the one definition, in
// Rust); field names and message types are the same camelCase/snake_case strings.

export interface Actor {
  userId: string;
  name: string;
  email?: string;
  avatar?: string;
}

export interface Me {
  user: Actor;
  via: "local" | "browser" | "api_token" | "service";
}

export interface RepositoryRef {
  owner: string;
  name: string;
  branch?: string;
}

export type SessionStatus = "created" | "active" | "archived";

export interface SessionState {
  id: string;
  title?: string | null;
  status: SessionStatus;
  repositories: RepositoryRef[];
  repoOwner?: string | null;
  repoName?: string | null;
  branchName?: string | null;
  model?: string | null;
  createdBy: string;
  sandboxStatus: string;
  messageCount: number;
  isProcessing: boolean;
  createdAt: number;
  updatedAt: number;
}

export interface SessionSummary {
  id: string;
  title?: string | null;
  status: SessionStatus;
  repoOwner?: string | null;
  repoName?: string | null;
  repositories: RepositoryRef[];
  createdBy: string;
  createdByName: string;
  messageCount: number;
  createdAt: number;
  updatedAt: number;
  /** The session's newest pull request, when it has one. */
  prUrl?: string | null;
  prState?: string | null;
}

export interface SessionList {
  sessions: SessionSummary[];
  cursor: string | null;
  hasMore: boolean;
}

export interface TimelineEvent {
  id: string;
  seq: number;
  type: string;
  timestamp: number;
  messageId?: string;
  [field: string]: unknown;
}

export interface EventPage {
  events: TimelineEvent[];
  cursor: string | null;
  hasMore: boolean;
}

export interface QueuedPrompt {
  messageId: string;
  authorId: string;
  authorName: string;
  content: string;
  status: "pending" | "processing" | "completed" | "failed";
  position: number;
  createdAt: number;
}

export interface Participant {
  participantId: string;
  userId: string;
  name: string;
  avatar?: string;
  role: string;
}

export interface Presence {
  participantId: string;
  userId: string;
  name: string;
  avatar?: string;
  status: "active" | "idle";
  lastSeen: number;
}

export interface Artifact {
  id: string;
  type: string;
  url?: string | null;
  metadata?: Record<string, unknown> | null;
  createdAt: number;
}

export type ServerMessage =
  | { type: "pong" }
  | {
      type: "subscribed";
      session: SessionState;
      artifacts: Artifact[];
      timeline: EventPage;
      promptQueue: QueuedPrompt[];
      participantId: string;
      participant: Participant;
    }
  | { type: "prompt_queued"; messageId: string; position: number; clientRequestId?: string }
  | { type: "prompt_cancelled"; messageId: string }
  | { type: "prompt_queue_updated"; promptQueue: QueuedPrompt[] }
  | { type: "sandbox_event"; event: TimelineEvent }
  | { type: "presence_sync" | "presence_update"; participants: Presence[] }
  | { type: "presence_leave"; participantId: string; userId: string }
  | { type: "sandbox_warming" }
  | { type: "sandbox_spawning"; sandboxId: string }
  | { type: "sandbox_status"; status: string; error?: string }
  | { type: "sandbox_ready"; sandboxId: string }
  | { type: "sandbox_error"; error: string }
  | { type: "sandbox_restored"; sandboxId: string; snapshotId: string }
  | { type: "artifact_created" | "artifact_updated"; artifact: Artifact }
  | { type: "snapshot_saved"; snapshotId: string }
  | { type: "tunnel_urls"; tunnelUrls: Record<string, string> }
  | { type: "processing_status"; isProcessing: boolean; messageId?: string }
  | { type: "history_page"; events: TimelineEvent[]; cursor: string | null; hasMore: boolean }
  | { type: "session_status"; status: SessionStatus }
  | { type: "session_title"; title: string | null }
  | { type: "error"; code: string; message: string; clientRequestId?: string };

export interface SecretSummary {
  key: string;
  createdAt: number;
  updatedAt: number;
}

export interface Repository {
  owner: string;
  name: string;
  kind: string;
  source: string;
  defaultBranch?: string | null;
  createdAt: number;
  private?: boolean;
  description?: string | null;
  updatedAt?: string | null;
}

export interface BranchList {
  branches: string[];
  defaultBranch?: string | null;
}

/** Per-repository settings (`/repos/:owner/:name/settings`). */
export interface RepoSettings {
  defaultModel?: string | null;
  alwaysDraft: boolean;
  prLabel?: string | null;
  botEnabled: boolean;
  autoReviewOnOpen: boolean;
  allowedTriggerUsers?: string[];
  defaultEnvironmentId?: string | null;
}

export interface ApiTokenSummary {
  id: string;
  name: string;
  createdAt: number;
  lastUsedAt?: number | null;
}
