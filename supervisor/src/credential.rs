//! `inspect-supervisor credential-helper get`: git's credential-helper protocol. Git runs
//! it for the supervisor's own git commands, which reach a remote with a short-lived
//! installation token the supervisor asked the control plane for
//! (`POST /sessions/:id/scm-credentials`, with the sandbox's token that never leaves the
//! supervisor); the helper hands it to git for the session's own remotes only. Nothing is
//! written to disk.

use anyhow::{bail, Context, Result};
use inspect_protocol::auth::{ScmCredentials, ScmCredentialsRequest};
use inspect_protocol::provider::SpawnRequest;
use std::collections::HashMap;
use std::io::{BufRead, Write};

/// An image build's token for the repositories' remotes (this helper answers git with it);
/// hooks never see it.
pub const GIT_TOKEN_VAR: &str = "INSPECT_GIT_TOKEN";

/// Where the helper notes that git was refused the token it gave (git's `erase`), for the
/// supervisor that ran that git to ask for a new one; set per git command.
pub const GIT_REFUSED_VAR: &str = "INSPECT_GIT_REFUSED_FILE";

/// Parses git's `key=value` lines (up to a blank line or the end).
pub fn parse_request(input: &str) -> HashMap<String, String> {
    input
        .lines()
        .take_while(|l| !l.is_empty())
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

/// Whether git asks about a host one of the session's repositories is cloned from: the
/// token goes nowhere else.
pub fn is_known_remote(request: &HashMap<String, String>, sources: &[String]) -> bool {
    let (Some(protocol), Some(host)) = (request.get("protocol"), request.get("host")) else {
        return false;
    };
    sources.iter().any(|s| {
        s.split_once("://").is_some_and(|(scheme, rest)| {
            let authority = rest.split('/').next().unwrap_or_default();
            let authority = authority.rsplit('@').next().unwrap_or_default();
            scheme == protocol && authority.eq_ignore_ascii_case(host)
        })
    })
}

/// The lines git reads back.
pub fn answer(token: &str) -> String {
    format!("username=x-access-token\npassword={token}\n\n")
}

fn var(name: &str) -> Result<String> {
    std::env::var(name)
        .with_context(|| format!("{name} is not set: not run by a sandbox's supervisor"))
}

pub async fn run(operation: &str) -> Result<()> {
    let mut input = String::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.is_empty() {
            break;
        }
        input.push_str(&line);
        input.push('\n');
    }
    let request = parse_request(&input);
    match operation {
        "get" => {}
        // Git was refused what `get` gave: say so to the supervisor that ran it (through
        // the file it named), which then asks for a new token and tries once more.
        "erase" => {
            if let (Ok(file), Ok(token)) =
                (std::env::var(GIT_REFUSED_VAR), std::env::var(GIT_TOKEN_VAR))
            {
                if request.get("password") == Some(&token) {
                    std::fs::write(file, "refused\n").context("noting the refusal")?;
                }
            }
            return Ok(());
        }
        // store: nothing is kept.
        _ => return Ok(()),
    }
    let spawn: SpawnRequest =
        serde_json::from_str(&var("INSPECT_SPAWN")?).context("INSPECT_SPAWN")?;
    let sources: Vec<String> = spawn
        .repositories
        .iter()
        .map(|r| r.source.clone())
        .collect();
    if !is_known_remote(&request, &sources) {
        // Say nothing: git moves on (and fails without a prompt).
        eprintln!(
            "inspect credential helper: {}://{} is not one of this session's remotes",
            request.get("protocol").map_or("", String::as_str),
            request.get("host").map_or("", String::as_str)
        );
        return Ok(());
    }
    // The supervisor that runs this git handed it a token for the session's remotes (or,
    // in an image build, the token the control plane gave the build). Without one, say
    // nothing: git fails without a prompt.
    if let Ok(token) = std::env::var(GIT_TOKEN_VAR) {
        let mut out = std::io::stdout().lock();
        out.write_all(answer(&token).as_bytes())?;
        out.flush()?;
    }
    Ok(())
}

/// Asks the control plane for git credentials with the sandbox's own token; `refused`:
/// the password git was just refused with, not to be given again.
pub async fn ask_control_plane(
    url: &str,
    sandbox_token: &str,
    sandbox_id: &str,
    refused: Option<&str>,
) -> Result<ScmCredentials> {
    let ask = ScmCredentialsRequest {
        refused: refused.map(str::to_owned),
    };
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(20))
        .build()?;
    // A request that never got an answer (a busy control plane, a dropped connection) is
    // asked again, twice at most; an answer, even a refusal, is final.
    let mut attempt = 0;
    let resp = loop {
        let sent = client
            .post(url)
            .bearer_auth(sandbox_token)
            .header(inspect_protocol::auth::SANDBOX_ID_HEADER, sandbox_id)
            .json(&ask)
            .send()
            .await;
        match sent {
            Ok(resp) => break resp,
            Err(e) if attempt < 2 && (e.is_timeout() || e.is_connect() || e.is_request()) => {
                attempt += 1;
                tracing::warn!("asking for git credentials again ({e})");
                tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
            }
            Err(e) => {
                return Err(e).context("asking the control plane for git credentials");
            }
        }
    };
    let status = resp.status();
    if !status.is_success() {
        let body = resp.text().await.unwrap_or_default();
        bail!("the control plane refused git credentials ({status}): {body}");
    }
    resp.json().await.context("reading git credentials")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_gits_request() {
        let r = parse_request("protocol=https\nhost=github.com\npath=acme/web.git\n\nignored=1\n");
        assert_eq!(r["protocol"], "https");
        assert_eq!(r["host"], "github.com");
        assert!(!r.contains_key("ignored"));
    }

    #[test]
    fn answers_only_for_the_sessions_remotes() {
        let sources = vec![
            "https://github.com/acme/web.git".to_string(),
            "http://127.0.0.1:9000/acme/api.git".to_string(),
            "/srv/local/repo".to_string(),
        ];
        let ask = |p: &str, h: &str| {
            is_known_remote(
                &parse_request(&format!("protocol={p}\nhost={h}\n")),
                &sources,
            )
        };
        assert!(ask("https", "github.com"));
        assert!(ask("https", "GitHub.com"));
        assert!(ask("http", "127.0.0.1:9000"));
        assert!(!ask("http", "github.com"));
        assert!(!ask("https", "evil.example"));
        assert!(!ask("https", "127.0.0.1:9000"));
        assert!(!is_known_remote(
            &parse_request("host=github.com\n"),
            &sources
        ));
    }

    #[test]
    fn the_answer_is_gits_format() {
        assert_eq!(
            answer("ghs_abc"),
            "username=x-access-token\npassword=ghs_abc\n\n"
        );
    }
}
