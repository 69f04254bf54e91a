//! Small helpers for talking to the Worker from tests.

use anyhow::Result;
use serde_json::Value;

/// A JSON response: status and body.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Value,
}

pub async fn get(url: &str) -> Result<Reply> {
    let resp = reqwest::Client::new().get(url).send().await?;
    reply(resp).await
}

pub async fn send(method: reqwest::Method, url: &str, body: Option<Value>) -> Result<Reply> {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    reply(req.send().await?).await
}

async fn reply(resp: reqwest::Response) -> Result<Reply> {
    let status = resp.status().as_u16();
    let text = resp.text().await?;
    let body = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    Ok(Reply { status, body })
}
