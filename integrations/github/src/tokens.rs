//! The installation tokens this isolate holds: each kept until ten minutes before it
//! expires, per scope (the App's own, and one per set of sessions' repositories). GitHub
//! can revoke one sooner (the App suspended or reinstalled, a token deleted); a token it
//! refuses is dropped, and the one minted to follow it is remembered, so a caller still
//! holding the old one is given the new one.

use std::cell::RefCell;

/// Refresh a cached token this long before GitHub says it expires.
pub const REFRESH_BEFORE_MS: i64 = 10 * 60 * 1000;

/// Tokens kept per scope.
const CACHED_SCOPES: usize = 32;

/// Refused tokens whose successor is remembered.
const SUCCESSORS: usize = 8;

/// What a token was minted for: the App, the installation, and the repositories it is
/// narrowed to (empty: every repository of the installation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scope {
    pub app_id: String,
    pub installation: String,
    pub repositories: Vec<String>,
}

struct Cached {
    scope: Scope,
    token: String,
    expires_at: i64,
}

#[derive(Default)]
struct Held {
    cached: Vec<Cached>,
    /// (refused token, the token minted after it), newest last.
    successors: Vec<(String, String)>,
}

thread_local! {
    static HELD: RefCell<Held> = RefCell::new(Held::default());
}

/// A token for `scope` with more than [`REFRESH_BEFORE_MS`] left, and when it expires.
pub fn fresh(scope: &Scope, now_ms: i64) -> Option<(String, i64)> {
    HELD.with(|h| {
        h.borrow()
            .cached
            .iter()
            .find(|c| &c.scope == scope && c.expires_at - now_ms > REFRESH_BEFORE_MS)
            .map(|c| (c.token.clone(), c.expires_at))
    })
}

/// Keeps a newly minted token (and drops the scope's older one and stale ones).
pub fn keep(scope: Scope, token: String, expires_at: i64, now_ms: i64) {
    HELD.with(|h| {
        let cached = &mut h.borrow_mut().cached;
        cached.retain(|c| c.scope != scope && c.expires_at - now_ms > REFRESH_BEFORE_MS);
        if cached.len() >= CACHED_SCOPES {
            cached.remove(0);
        }
        cached.push(Cached {
            scope,
            token,
            expires_at,
        });
    });
}

/// GitHub refused `token`: it is dropped. Its scope, when it was one of the tokens held
/// here (a person's token, or one dropped already, gives `None`).
pub fn refused(token: &str) -> Option<Scope> {
    HELD.with(|h| {
        let cached = &mut h.borrow_mut().cached;
        let at = cached.iter().position(|c| c.token == token)?;
        Some(cached.remove(at).scope)
    })
}

/// Git in a sandbox was refused `token` for `repositories` (git's credential `erase`): it
/// is dropped when it is the token held for those repositories. Nothing else is touched:
/// a sandbox names only what it was given.
pub fn refused_for(repositories: &[String], token: &str) -> bool {
    HELD.with(|h| {
        let cached = &mut h.borrow_mut().cached;
        let Some(at) = cached
            .iter()
            .position(|c| c.token == token && c.scope.repositories == repositories)
        else {
            return false;
        };
        cached.remove(at);
        true
    })
}

/// `new` was minted to follow the refused `old`.
pub fn succeeded(old: &str, new: &str) {
    HELD.with(|h| {
        let successors = &mut h.borrow_mut().successors;
        successors.retain(|(o, _)| o != old);
        if successors.len() >= SUCCESSORS {
            successors.remove(0);
        }
        successors.push((old.to_owned(), new.to_owned()));
    });
}

/// The token to send in place of `token`: its successor when GitHub refused it.
pub fn current(token: &str) -> Option<String> {
    HELD.with(|h| {
        h.borrow()
            .successors
            .iter()
            .rev()
            .find(|(old, _)| old == token)
            .map(|(_, new)| new.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(repos: &[&str]) -> Scope {
        Scope {
            app_id: "1".into(),
            installation: "2".into(),
            repositories: repos.iter().map(|r| r.to_string()).collect(),
        }
    }

    #[test]
    fn a_token_is_kept_until_ten_minutes_before_it_expires() {
        let s = scope(&[]);
        keep(s.clone(), "t1".into(), 3_600_000, 0);
        assert_eq!(fresh(&s, 0), Some(("t1".into(), 3_600_000)));
        assert_eq!(fresh(&s, 3_000_000), None);
        assert_eq!(fresh(&scope(&["web"]), 0), None, "each scope its own");
    }

    #[test]
    fn a_refused_token_is_dropped_once_and_its_successor_given_for_it() {
        let s = scope(&["web"]);
        keep(s.clone(), "old".into(), 3_600_000, 0);
        assert_eq!(refused("old"), Some(s.clone()));
        assert_eq!(fresh(&s, 0), None);
        assert_eq!(refused("old"), None, "only once");
        assert_eq!(refused("a person's token"), None);
        assert_eq!(current("old"), None);
        succeeded("old", "new");
        keep(s.clone(), "new".into(), 3_600_000, 0);
        assert_eq!(current("old").as_deref(), Some("new"));
        assert_eq!(current("new"), None);
        assert_eq!(fresh(&s, 0).map(|t| t.0).as_deref(), Some("new"));
    }

    #[test]
    fn git_drops_only_the_token_it_was_given_for_its_repositories() {
        let web = scope(&["acme/web"]);
        let api = scope(&["acme/api"]);
        keep(web.clone(), "w".into(), 3_600_000, 0);
        keep(api.clone(), "a".into(), 3_600_000, 0);
        assert!(
            !refused_for(&web.repositories, "a"),
            "another scope's token"
        );
        assert!(!refused_for(&web.repositories, "guess"));
        assert!(fresh(&api, 0).is_some());
        assert!(refused_for(&web.repositories, "w"));
        assert_eq!(fresh(&web, 0), None);
        assert!(!refused_for(&web.repositories, "w"), "only once");
    }
}
