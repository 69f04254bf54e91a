//! One HTTP call from the Durable Object with a deadline, for the provider clients.

use std::time::Duration;
use worker::{Fetch, Headers, Method, Request, RequestInit};

/// Sends `body` (JSON, when given) to `url` with `headers`; the answer's status and text.
/// `Err` says why there is no answer (unreachable, or nothing within `deadline`): both are
/// worth trying again later.
pub async fn call(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<String>,
    deadline: Duration,
) -> Result<(u16, String), String> {
    let h = Headers::new();
    for (k, v) in headers {
        h.set(k, v).map_err(|e| e.to_string())?;
    }
    h.set("Accept", "application/json")
        .map_err(|e| e.to_string())?;
    let mut init = RequestInit::new();
    init.with_method(method);
    if let Some(b) = body {
        h.set("Content-Type", "application/json")
            .map_err(|e| e.to_string())?;
        init.with_body(Some(wasm_bindgen::JsValue::from_str(&b)));
    }
    init.with_headers(h);
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let answer = async {
        let mut resp = Fetch::Request(req)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let text = resp.text().await.unwrap_or_default();
        Ok((resp.status_code(), text))
    };
    let timer = worker::Delay::from(deadline);
    futures::pin_mut!(answer);
    match futures::future::select(answer, timer).await {
        futures::future::Either::Left((answer, _)) => answer,
        futures::future::Either::Right(_) => {
            Err(format!("no answer within {} s", deadline.as_secs()))
        }
    }
}
