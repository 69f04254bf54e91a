//! `inspect login` through the browser: the CLI listens on a loopback port, opens the
//! server's `/settings/cli?port=…&state=…` page, and the signed-in person's "Allow" there
//! makes a personal API token and posts it back to `http://127.0.0.1:port/callback` with the
//! same one-time `state` (a form post: the token is never in a URL or the browser's
//! history). A post with another state is refused and waited past; a token pasted on the
//! terminal is taken as well.

use crate::api::{Failure, Result};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Html;
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;
use std::time::Duration;
use tokio::sync::mpsc;

/// How long the browser is waited for.
const WAIT: Duration = Duration::from_secs(600);

#[derive(Deserialize)]
struct Callback {
    state: String,
    #[serde(default)]
    token: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Clone)]
struct Waiting {
    state: String,
    answer: mpsc::Sender<std::result::Result<String, String>>,
}

/// A token from the browser (or pasted), not yet checked with the server.
pub async fn token(server: &str, open_browser: bool) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Failure::failed(format!("a loopback port for the browser: {e}")))?;
    let port = listener
        .local_addr()
        .map_err(|e| Failure::failed(e.to_string()))?
        .port();
    let state = one_time_state()?;
    let link = format!("{server}/settings/cli?port={port}&state={state}");
    eprintln!("To sign in, open this page and choose Allow:\n  {link}");
    eprintln!("(or paste a token made in Settings › Account, then Enter)");
    if open_browser && webbrowser::open(&link).is_err() {
        eprintln!("(no browser could be opened here: open the page yourself)");
    }
    let (tx, mut rx) = mpsc::channel(1);
    let app = Router::new()
        .route("/callback", post(callback))
        .with_state(Waiting { state, answer: tx });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let serving = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
    });
    let got = tokio::select! {
        answer = rx.recv() => match answer {
            Some(Ok(token)) => Ok(token),
            Some(Err(why)) => Err(Failure::new(crate::api::exit::AUTH, why)),
            None => Err(Failure::failed("the loopback listener stopped")),
        },
        pasted = pasted() => Ok(pasted),
        _ = tokio::time::sleep(WAIT) => Err(Failure::new(
            crate::api::exit::AUTH,
            "no answer from the browser in 10 minutes: run `inspect login` again",
        )),
    };
    // The browser's page is answered before the listener goes.
    let _ = stop.send(());
    let _ = tokio::time::timeout(Duration::from_secs(2), serving).await;
    got
}

/// A line typed on the terminal; never, when stdin ends without one.
async fn pasted() -> String {
    use tokio::io::AsyncBufReadExt;
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if !line.trim().is_empty() {
            return line.trim().to_owned();
        }
    }
    std::future::pending().await
}

async fn callback(State(w): State<Waiting>, Form(c): Form<Callback>) -> (StatusCode, Html<String>) {
    if !same(c.state.as_bytes(), w.state.as_bytes()) {
        return (
            StatusCode::BAD_REQUEST,
            page("This sign-in was not asked for by the command line waiting here."),
        );
    }
    let answer = match (c.token, c.error) {
        (Some(t), None) if !t.trim().is_empty() => Ok(t.trim().to_owned()),
        (_, Some(e)) => Err(format!("the browser did not allow it ({e})")),
        _ => Err("the browser sent no token".to_owned()),
    };
    let allowed = answer.is_ok();
    let _ = w.answer.try_send(answer);
    (
        StatusCode::OK,
        page(if allowed {
            "Signed in. You can close this tab and go back to the terminal."
        } else {
            "Not signed in. You can close this tab."
        }),
    )
}

fn page(text: &str) -> Html<String> {
    Html(format!(
        "<!doctype html><meta charset=utf-8><title>inspect</title>\
         <body style=\"font:16px system-ui;margin:3rem\"><p>{text}</p>"
    ))
}

/// Compared in constant time.
fn same(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.ct_eq(b).into()
}

/// 24 random bytes, hex.
fn one_time_state() -> Result<String> {
    let mut raw = [0u8; 24];
    getrandom::fill(&mut raw).map_err(|e| Failure::failed(format!("randomness: {e}")))?;
    Ok(raw.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn states_are_fresh_and_compared_whole() {
        let a = one_time_state().unwrap();
        assert_eq!(a.len(), 48);
        assert_ne!(a, one_time_state().unwrap());
        assert!(same(a.as_bytes(), a.clone().as_bytes()));
        assert!(!same(a.as_bytes(), &a.as_bytes()[..47]));
        assert!(!same(b"abc", b"abd"));
    }
}
