//! Which images in a message are taken into the prompt: png, jpeg, webp or gif, at most
//! 10 MiB each and 6 in all, hosted by Slack and downloaded from Slack's own hosts (or the
//! origin a test's fake Slack serves files from).

use crate::events::SlackFile;

pub const MAX_IMAGE_BYTES: u64 = inspect_protocol::limits::MAX_ATTACHMENT_FILE_BYTES as u64;
pub const MAX_IMAGES: usize = 6;
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/webp", "image/gif"];

/// An image to download: where from, and as what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub url: String,
    pub name: String,
    pub mime_type: String,
}

/// Whether `url` is on Slack's hosts (`https://slack.com`, `https://*.slack.com`) or on
/// `also` (a configured file origin). The URL is parsed as the runtime's fetch parses it
/// (WHATWG): the host compared is the one the bot token would be sent to, whatever the
/// text looks like (`https://evil.example\.slack.com/` is evil.example).
pub fn on_slack(url: &str, also: Option<&str>) -> bool {
    let Ok(parsed) = url::Url::parse(url) else {
        return false;
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return false;
    }
    if let Some(origin) = also.filter(|o| !o.is_empty()) {
        if let Ok(o) = url::Url::parse(origin) {
            if o.origin() == parsed.origin() {
                return true;
            }
        }
    }
    let host = match parsed.host() {
        Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
        _ => return false,
    };
    parsed.scheme() == "https"
        && parsed.port().is_none()
        && (host == "slack.com" || host.ends_with(".slack.com"))
}

/// The images to take, and why each other file was left.
pub fn images(files: &[SlackFile], also: Option<&str>) -> (Vec<Wanted>, Vec<String>) {
    let mut taken = Vec::new();
    let mut left = Vec::new();
    for f in files {
        let name = if f.name.is_empty() {
            f.id.clone()
        } else {
            f.name.clone()
        };
        if !IMAGE_TYPES.contains(&f.mimetype.as_str()) {
            left.push(format!("{name}: not a png, jpeg, webp or gif image"));
            continue;
        }
        if f.mode.as_deref() == Some("external") {
            left.push(format!("{name}: hosted outside Slack"));
            continue;
        }
        if f.size > MAX_IMAGE_BYTES {
            left.push(format!("{name}: larger than 10 MiB"));
            continue;
        }
        let Some(url) = f.url_private_download.clone().or(f.url_private.clone()) else {
            left.push(format!("{name}: no download address"));
            continue;
        };
        if !on_slack(&url, also) {
            left.push(format!("{name}: not on Slack's hosts"));
            continue;
        }
        if taken.len() == MAX_IMAGES {
            left.push(format!("{name}: at most {MAX_IMAGES} images a message"));
            continue;
        }
        taken.push(Wanted {
            url,
            name,
            mime_type: f.mimetype.clone(),
        });
    }
    (taken, left)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: &str, mime: &str, size: u64, url: &str) -> SlackFile {
        SlackFile {
            id: format!("F{name}"),
            name: name.into(),
            mimetype: mime.into(),
            size,
            url_private_download: Some(url.into()),
            url_private: None,
            mode: Some("hosted".into()),
        }
    }

    #[test]
    fn hosts() {
        assert!(on_slack(
            "https://files.slack.com/files-pri/T1-F1/a.png",
            None
        ));
        assert!(on_slack("https://slack.com/x", None));
        assert!(!on_slack("http://files.slack.com/x", None));
        assert!(!on_slack("https://files.slack.com.evil.io/x", None));
        assert!(!on_slack("https://evil.io/files.slack.com/x", None));
        assert!(!on_slack("https://user@files.slack.com/x", None));
        assert!(!on_slack("https://evil.example\\.slack.com/x", None));
        assert!(!on_slack("https://evil.example%5C.slack.com/x", None));
        assert!(!on_slack("https://files.slack.com:8443/x", None));
        assert!(on_slack(
            "http://127.0.0.1:9/files/a.png",
            Some("http://127.0.0.1:9")
        ));
        assert!(!on_slack(
            "http://127.0.0.1:99/files/a.png",
            Some("http://127.0.0.1:9")
        ));
    }

    #[test]
    fn types_sizes_counts_and_hosts() {
        let ok = "https://files.slack.com/a";
        let mut files = vec![
            file("doc.pdf", "application/pdf", 10, ok),
            file("big.png", "image/png", MAX_IMAGE_BYTES + 1, ok),
            file("elsewhere.png", "image/png", 10, "https://evil.io/a.png"),
        ];
        for i in 0..7 {
            files.push(file(&format!("{i}.jpg"), "image/jpeg", 10, ok));
        }
        let mut ext = file("ext.gif", "image/gif", 10, ok);
        ext.mode = Some("external".into());
        files.push(ext);
        let (taken, left) = images(&files, None);
        assert_eq!(taken.len(), 6);
        assert_eq!(left.len(), 5, "{left:?}");
        assert!(left.iter().any(|l| l.contains("at most 6")));
        assert!(left.iter().any(|l| l.contains("10 MiB")));
        assert!(left.iter().any(|l| l.contains("outside Slack")));
    }
}
