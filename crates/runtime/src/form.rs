//! A form POST to an OAuth token endpoint (`application/x-www-form-urlencoded`, JSON back):
//! a brokered grant's refresh, an OpenID sign-in's code exchange. The status and the text.

use inspect_protocol::{ApiError, ErrorCode};

pub async fn post_form(url: &str, form: &str) -> Result<(u16, String), ApiError> {
    let fail = |e: worker::Error| {
        ApiError::new(ErrorCode::Unavailable, format!("the token endpoint: {e}"))
    };
    let headers = worker::Headers::new();
    headers
        .set("Content-Type", "application/x-www-form-urlencoded")
        .map_err(fail)?;
    headers.set("Accept", "application/json").map_err(fail)?;
    let mut init = worker::RequestInit::new();
    init.with_method(worker::Method::Post)
        .with_headers(headers)
        .with_body(Some(worker::wasm_bindgen::JsValue::from_str(form)));
    let req = worker::Request::new_with_init(url, &init).map_err(fail)?;
    let mut resp = worker::Fetch::Request(req).send().await.map_err(fail)?;
    Ok((resp.status_code(), resp.text().await.unwrap_or_default()))
}
