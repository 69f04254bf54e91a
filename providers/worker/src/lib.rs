//! The providers Worker: the sandbox vendors' clients (`inspect_providers::AnyProvider`)
//! and their keys, in a script of their own. The session Worker's objects (a sandbox's
//! create, stop, snapshot, resume…) and the control plane (image builds, the health check)
//! call it over a service binding with one [`ProviderCall`] per request; it answers
//! `Result<T, ProviderError>` as JSON. It has no public address, and answers only
//! `POST https://providers.internal/call`.

use inspect_protocol::providers::{ProviderCall, MAX_PROVIDER_CALL_BYTES};

/// Whether a request is a call: its method, host and path.
pub fn is_call(method: &str, host: Option<&str>, path: &str) -> bool {
    use inspect_protocol::providers::{PROVIDERS_CALL_PATH, PROVIDERS_HOST};
    method == "POST" && host == Some(PROVIDERS_HOST) && path == PROVIDERS_CALL_PATH
}

/// A call's body read as a [`ProviderCall`], or why it is not one.
pub fn read_call(body: &[u8]) -> Result<ProviderCall, String> {
    if body.len() > MAX_PROVIDER_CALL_BYTES {
        return Err(format!(
            "a call is at most {MAX_PROVIDER_CALL_BYTES} bytes (this one has {})",
            body.len()
        ));
    }
    serde_json::from_slice(body).map_err(|e| format!("not a provider call: {e}"))
}

#[cfg(target_arch = "wasm32")]
mod shell {
    use inspect_protocol::{ApiError, ErrorBody, ErrorCode};
    use worker::{event, Context, Env, Request, Response, Result};

    #[event(start)]
    fn start() {
        console_error_panic_hook::set_once();
    }

    fn refuse(code: ErrorCode, message: String, status: u16) -> Result<Response> {
        let body = ErrorBody {
            error: ApiError::new(code, message),
        };
        Ok(Response::from_json(&body)?.with_status(status))
    }

    #[event(fetch)]
    async fn fetch(mut req: Request, env: Env, _ctx: Context) -> Result<Response> {
        let url = req.url()?;
        if !super::is_call(req.method().as_ref(), url.host_str(), url.path()) {
            return refuse(ErrorCode::NotFound, "no such route".into(), 404);
        }
        let body = req.bytes().await?;
        let call = match super::read_call(&body) {
            Ok(call) => call,
            Err(why) => return refuse(ErrorCode::BadRequest, why, 400),
        };
        Response::from_json(&inspect_providers::answer(&env, call).await)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_well_formed_call_on_the_internal_host_is_answered() {
        assert!(is_call("POST", Some("providers.internal"), "/call"));
        assert!(!is_call("GET", Some("providers.internal"), "/call"));
        assert!(!is_call("POST", Some("example.com"), "/call"));
        assert!(!is_call("POST", Some("providers.internal"), "/call/x"));
        assert_eq!(
            read_call(br#""runtime_version""#).unwrap(),
            ProviderCall::RuntimeVersion
        );
        assert!(read_call(br#"{"launch":{}}"#)
            .unwrap_err()
            .contains("not a provider call"));
        let big = vec![b' '; MAX_PROVIDER_CALL_BYTES + 1];
        assert!(read_call(&big).unwrap_err().contains("at most"));
    }
}
