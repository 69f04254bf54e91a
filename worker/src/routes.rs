//! Which route a request is for. Pure: method and path in, a [`Route`] or an error out.

use inspect_protocol::{ApiError, ErrorCode};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    Health,
}

/// Matches a method and path against the Worker's routes. `None` means no API route:
/// the caller may still serve a static asset.
pub fn match_route(method: &str, path: &str) -> Option<Result<Route, ApiError>> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let route = match segments.as_slice() {
        ["health"] => only(method, &["GET"], Route::Health),
        _ => return None,
    };
    Some(route)
}

fn only(method: &str, allowed: &[&str], route: Route) -> Result<Route, ApiError> {
    if allowed.contains(&method) {
        Ok(route)
    } else {
        Err(ApiError::new(
            ErrorCode::MethodNotAllowed,
            format!("{method} is not served here; use {}", allowed.join(" or ")),
        ))
    }
}

/// The error for a path that is neither a route nor an asset.
pub fn not_found(method: &str, path: &str) -> ApiError {
    ApiError::not_found(format!("no route for {method} {path}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_is_get_only() {
        assert_eq!(match_route("GET", "/health"), Some(Ok(Route::Health)));
        assert_eq!(match_route("GET", "/health/"), Some(Ok(Route::Health)));
        let err = match_route("POST", "/health").unwrap().unwrap_err();
        assert_eq!(err.code, ErrorCode::MethodNotAllowed);
    }

    #[test]
    fn unknown_paths_are_not_routes() {
        assert_eq!(match_route("GET", "/nope"), None);
        assert_eq!(match_route("GET", "/"), None);
    }
}
