//! The cron triggers' work, on the control plane Worker: the session Worker's `scheduled`
//! event (its configuration holds the triggers) hands each one over the binding.

use crate::http::ApiResult;
use worker::Env;

/// The cron trigger that only fires due automations (`wrangler.toml`).
const EVERY_MINUTE: &str = "* * * * *";

/// The cron triggers: due automations fire (every minute); every 30 minutes also stuck
/// image builds time out, scheduled ones start, Slack's old threads and picks are
/// forgotten, the installation's repositories are synced from GitHub, and pull requests
/// still open that no delivery mentioned for 30 minutes are asked about.
pub(crate) async fn run(env: &Env, cron: &str, now: i64) {
    let fired = crate::automations::tick(env, now).await;
    cron_step(
        cron,
        ("automations_fired", "automations_fire_failed"),
        "runs",
        fired,
    );
    // The minute's trigger is the automations' alone; the rest every 30 minutes.
    if cron == EVERY_MINUTE {
        return;
    }
    let images = crate::images::tick(env, now).await;
    cron_step(
        cron,
        ("images_checked", "images_check_failed"),
        "started",
        images,
    );
    let pruned = inspect_slack::bot::prune(env, now).await;
    cron_step(cron, ("slack_pruned", "slack_prune_failed"), "rows", pruned);
    let pruned = inspect_linear::bot::prune(env, now).await;
    cron_step(
        cron,
        ("linear_pruned", "linear_prune_failed"),
        "rows",
        pruned,
    );
    if crate::db::setting(env, "GITHUB_APP_ID").is_some() {
        let synced = inspect_github::installation::sync(env, now).await;
        let names = ("repositories_synced", "repositories_sync_failed");
        cron_step(cron, names, "repositories", synced);
        let checked = crate::pull_requests::refresh(env, now).await;
        let names = ("pull_requests_checked", "pull_requests_check_failed");
        cron_step(cron, names, "changed", checked);
    }
}

/// One line for a step of the cron trigger (its event when it worked, when it failed): how
/// many things it did, or why it failed.
fn cron_step(cron: &str, (done, failed): (&str, &str), counted: &str, outcome: ApiResult<usize>) {
    use inspect_runtime::log::{emit, LogLine};
    match outcome {
        Ok(n) => emit(
            LogLine::info("cron", done)
                .with("cron", cron)
                .with(counted, n),
        ),
        Err(e) => emit(
            LogLine::error("cron", failed)
                .with("cron", cron)
                .detail(e.message),
        ),
    }
}
