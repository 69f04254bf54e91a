//! Signed commits for repositories that require them: the commits a session pushed to its
//! branch are made again through GitHub's Git Data API with the App's installation token
//! (`POST /git/commits` with the same tree, message and author, and no committer of ours:
//! GitHub commits and signs them), and the branch is moved onto the signed chain. Pure: which
//! commits need it; the calls are `sign_branch` (wasm).

use serde::Deserialize;

/// A commit as `GET /compare` lists it (the fields used).
#[derive(Debug, Clone, Deserialize)]
pub struct Listed {
    pub sha: String,
    pub commit: Inner,
    #[serde(default)]
    pub parents: Vec<ParentRef>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Inner {
    pub message: String,
    pub tree: TreeRef,
    pub author: Signature,
    #[serde(default)]
    pub verification: Option<Verification>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct TreeRef {
    pub sha: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ParentRef {
    pub sha: String,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, PartialEq, Eq)]
pub struct Signature {
    pub name: String,
    pub email: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Verification {
    #[serde(default)]
    pub verified: bool,
}

/// `GET /repos/{o}/{r}/compare/{base}...{head}`.
#[derive(Debug, Clone, Deserialize)]
pub struct Comparison {
    pub merge_base_commit: ParentRef,
    #[serde(default)]
    pub commits: Vec<Listed>,
    #[serde(default)]
    pub total_commits: usize,
}

/// At most this many commits are made again on one branch (GitHub's compare lists 250).
pub const MAX_COMMITS: usize = 250;

/// Whether `c` can stay as it is on a chain whose previous commit is `parent`: signed
/// already, and on that very parent.
pub fn keeps(c: &Listed, parent: &str) -> bool {
    let signed = c.commit.verification.as_ref().is_some_and(|v| v.verified);
    signed && c.parents.len() == 1 && c.parents[0].sha == parent
}

/// The body of `POST /git/commits` that makes `c` again on `parent` (a merge becomes a
/// commit of the same tree on the chain).
pub fn remake(c: &Listed, parent: &str) -> serde_json::Value {
    serde_json::json!({
        "message": c.commit.message,
        "tree": c.commit.tree.sha,
        "parents": [parent],
        "author": c.commit.author,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(sha: &str, parent: &str, verified: bool) -> Listed {
        serde_json::from_value(serde_json::json!({
            "sha": sha,
            "commit": {"message": "m", "tree": {"sha": "t"}, "author": {"name": "Ann", "email": "a@x", "date": "2026-12-05T00:00:00Z"},
                       "committer": {"name": "GitHub", "email": "noreply@github.com"},
                       "verification": {"verified": verified, "reason": if verified { "valid" } else { "unsigned" }, "signature": null, "payload": null}},
            "parents": [{"sha": parent, "url": "u"}]
        }))
        .unwrap()
    }

    #[test]
    fn a_signed_commit_on_its_parent_stays_and_the_rest_are_made_again() {
        assert!(keeps(&listed("b", "a", true), "a"));
        assert!(!keeps(&listed("b", "a", false), "a"), "unsigned");
        assert!(
            !keeps(&listed("b", "a", true), "a2"),
            "its parent was made again"
        );
        let body = remake(&listed("b", "a", false), "a2");
        assert_eq!(body["parents"], serde_json::json!(["a2"]));
        assert_eq!(body["tree"], "t");
        assert_eq!(body["author"]["name"], "Ann");
        assert!(body.get("committer").is_none(), "GitHub commits, and signs");
    }
}
