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
    let body = body.map(|b| ("application/json", b.into_bytes()));
    let (status, bytes) = call_bytes(method, url, headers, body, deadline).await?;
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

/// Like [`call`], with a body of any type (`(content type, bytes)`) and the answer's bytes.
pub async fn call_bytes(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, Vec<u8>)>,
    deadline: Duration,
) -> Result<(u16, Vec<u8>), String> {
    let h = Headers::new();
    for (k, v) in headers {
        h.set(k, v).map_err(|e| e.to_string())?;
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("accept"))
    {
        h.set("Accept", "application/json")
            .map_err(|e| e.to_string())?;
    }
    let mut init = RequestInit::new();
    init.with_method(method);
    if let Some((content_type, bytes)) = body {
        h.set("Content-Type", content_type)
            .map_err(|e| e.to_string())?;
        let array = worker::js_sys::Uint8Array::from(bytes.as_slice());
        init.with_body(Some(array.into()));
    }
    init.with_headers(h);
    let req = Request::new_with_init(url, &init).map_err(|e| e.to_string())?;
    let answer = async {
        let mut resp = Fetch::Request(req)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let bytes = resp.bytes().await.unwrap_or_default();
        Ok((resp.status_code(), bytes))
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

/// One call to a vendor's JSON API: the answer (`Null` when it is not JSON), `None` for a
/// 404. No answer at all is transient, in the vendor's name; an error answer is what
/// `failure` makes of it.
pub async fn vendor_call(
    vendor: &str,
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&serde_json::Value>,
    deadline: Duration,
    failure: impl Fn(u16, &str) -> crate::ProviderError,
) -> Result<Option<serde_json::Value>, crate::ProviderError> {
    let (status, text) = call(
        method,
        url,
        headers,
        body.map(serde_json::Value::to_string),
        deadline,
    )
    .await
    .map_err(|e| crate::ProviderError::Transient(format!("{vendor}: {e}")))?;
    match status {
        200..=299 => Ok(Some(
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        )),
        404 => Ok(None),
        _ => Err(failure(status, &text)),
    }
}
