//! `GET /sessions`: its filters and its cursor, parsed and checked without I/O.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use inspect_protocol::session::SessionStatus;
use inspect_protocol::ApiError;

pub const LIST_DEFAULT: usize = 50;
pub const LIST_MAX: usize = 100;

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ListQuery {
    /// `None` lists every status but archived; `Some(None)` lists all.
    pub status: Option<Option<SessionStatus>>,
    pub repo: Option<(String, String)>,
    pub participant: Option<String>,
    pub limit: usize,
    /// Sessions created before this point (created_at, id), newest first.
    pub before: Option<(i64, String)>,
    /// Words to find in the title, the repositories, the author's name or the prompts.
    pub text: Option<String>,
}

/// The longest search text taken.
pub const MAX_SEARCH_CHARS: usize = 200;

/// A `LIKE` pattern that finds `text` anywhere, with `\` escaping its wildcards.
pub fn like_pattern(text: &str) -> String {
    let mut out = String::from("%");
    for c in text.chars() {
        if matches!(c, '%' | '_' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('%');
    out
}

/// Parses the query string's pairs. `me` is the caller's user id, for `mine=true`.
pub fn parse(pairs: &[(String, String)], me: &str) -> Result<ListQuery, ApiError> {
    let mut q = ListQuery {
        limit: LIST_DEFAULT,
        ..Default::default()
    };
    for (k, v) in pairs {
        match k.as_str() {
            "status" => {
                q.status = Some(match v.as_str() {
                    "all" => None,
                    s => Some(SessionStatus::parse(s).ok_or_else(|| {
                        ApiError::bad_request("status is one of created, active, archived, all")
                    })?),
                })
            }
            "repo" => {
                let (owner, name) = v
                    .split_once('/')
                    .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
                    .ok_or_else(|| ApiError::bad_request("repo is owner/name"))?;
                q.repo = Some((owner.to_owned(), name.to_owned()));
            }
            "participant" => q.participant = Some(v.clone()),
            "mine" if v == "true" || v == "1" => q.participant = Some(me.to_owned()),
            "limit" => {
                q.limit = v
                    .parse::<usize>()
                    .ok()
                    .filter(|l| (1..=LIST_MAX).contains(l))
                    .ok_or_else(|| ApiError::bad_request(format!("limit is 1 to {LIST_MAX}")))?;
            }
            "cursor" => q.before = Some(decode_cursor(v)?),
            "q" => {
                let t = v.trim();
                if t.chars().count() > MAX_SEARCH_CHARS {
                    return Err(ApiError::bad_request(format!(
                        "q is at most {MAX_SEARCH_CHARS} characters"
                    )));
                }
                q.text = (!t.is_empty()).then(|| t.to_owned());
            }
            _ => {}
        }
    }
    Ok(q)
}

pub fn encode_cursor(created_at: i64, id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("{created_at}:{id}"))
}

pub fn decode_cursor(cursor: &str) -> Result<(i64, String), ApiError> {
    let bad = || ApiError::bad_request("malformed cursor");
    let raw = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| bad())?;
    let text = String::from_utf8(raw).map_err(|_| bad())?;
    let (t, id) = text.split_once(':').ok_or_else(bad)?;
    Ok((t.parse().map_err(|_| bad())?, id.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect()
    }

    #[test]
    fn filters_and_cursor() {
        let q = parse(
            &pairs(&[
                ("status", "archived"),
                ("repo", "acme/api"),
                ("mine", "true"),
                ("limit", "5"),
            ]),
            "u1",
        )
        .unwrap();
        assert_eq!(q.status, Some(Some(SessionStatus::Archived)));
        assert_eq!(q.repo, Some(("acme".into(), "api".into())));
        assert_eq!(q.participant.as_deref(), Some("u1"));
        assert_eq!(q.limit, 5);
        let c = encode_cursor(123, "abc");
        assert_eq!(decode_cursor(&c).unwrap(), (123, "abc".into()));
        assert!(decode_cursor("!!").is_err());
        assert!(parse(&pairs(&[("limit", "0")]), "u").is_err());
        assert!(parse(&pairs(&[("status", "weird")]), "u").is_err());
        assert!(parse(&pairs(&[("repo", "nope")]), "u").is_err());
        assert_eq!(
            parse(&pairs(&[("status", "all")]), "u").unwrap().status,
            Some(None)
        );
        assert_eq!(
            parse(&pairs(&[("q", "  login bug ")]), "u")
                .unwrap()
                .text
                .as_deref(),
            Some("login bug")
        );
        assert_eq!(parse(&pairs(&[("q", " ")]), "u").unwrap().text, None);
        assert!(parse(&pairs(&[("q", &"x".repeat(201))]), "u").is_err());
        assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
    }
}
