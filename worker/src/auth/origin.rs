//! Cross-site requests. A browser attaches the session cookie to requests other sites'
//! pages make, and in local mode a page on any site reaches the Worker on loopback: a
//! state-changing request from a browser must come from the Worker's own pages. Browsers
//! say where a request comes from (`Origin`, `Sec-Fetch-Site`); clients that are no
//! browser (curl, scripts) send neither and are not affected.

use inspect_protocol::{ApiError, ErrorCode};

/// Methods that change nothing; a cross-site page cannot read their answers (no CORS).
fn is_safe(method: &str) -> bool {
    matches!(method, "GET" | "HEAD" | "OPTIONS")
}

/// Refuses a state-changing request that a browser made from another origin: `Origin`
/// other than `ours` (including `null`), or `Sec-Fetch-Site` other than `same-origin` (or
/// `none`, a person's own navigation). `same-site` is refused too: another port on the same
/// host is another application.
pub fn check_same_origin(
    method: &str,
    origin: Option<&str>,
    fetch_site: Option<&str>,
    ours: &str,
) -> Result<(), ApiError> {
    if is_safe(method) {
        return Ok(());
    }
    let refuse = |why: String| Err(ApiError::new(ErrorCode::Forbidden, why));
    if let Some(site) = fetch_site.map(str::trim) {
        if !site.eq_ignore_ascii_case("same-origin") && !site.eq_ignore_ascii_case("none") {
            return refuse(format!(
                "cross-site request refused (Sec-Fetch-Site: {site}): only this control plane's own pages may change things here"
            ));
        }
    }
    if let Some(origin) = origin.map(str::trim) {
        if !origin.eq_ignore_ascii_case(ours) {
            return refuse(format!(
                "cross-site request refused (Origin: {origin}): only this control plane's own pages may change things here"
            ));
        }
    }
    Ok(())
}

/// Whether a `Content-Type` names JSON (`application/json`, or a `+json` type), with any
/// parameters (`; charset=utf-8`).
pub fn is_json_content_type(value: &str) -> bool {
    let media = value.split(';').next().unwrap_or_default().trim();
    media.eq_ignore_ascii_case("application/json")
        || media
            .rsplit_once('+')
            .is_some_and(|(kind, suffix)| kind.contains('/') && suffix.eq_ignore_ascii_case("json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OURS: &str = "http://127.0.0.1:8787";

    #[test]
    fn reads_pass_and_own_pages_pass() {
        assert!(check_same_origin(
            "GET",
            Some("https://evil.example"),
            Some("cross-site"),
            OURS
        )
        .is_ok());
        assert!(check_same_origin("POST", Some(OURS), Some("same-origin"), OURS).is_ok());
        assert!(check_same_origin("POST", None, None, OURS).is_ok());
        assert!(check_same_origin("DELETE", None, Some("none"), OURS).is_ok());
    }

    #[test]
    fn other_sites_are_refused() {
        for (origin, site) in [
            (Some("https://evil.example"), None),
            (None, Some("cross-site")),
            (Some("null"), None),
            (Some("http://127.0.0.1:5173"), Some("same-site")),
            (Some(OURS), Some("same-site")),
        ] {
            let err = check_same_origin("POST", origin, site, OURS).unwrap_err();
            assert_eq!(err.status(), 403, "{origin:?} {site:?}");
        }
    }

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "application/json; charset=utf-8",
            "Application/JSON",
            "application/merge-patch+json",
        ] {
            assert!(is_json_content_type(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "",
            "json",
        ] {
            assert!(!is_json_content_type(bad), "{bad}");
        }
    }
}
