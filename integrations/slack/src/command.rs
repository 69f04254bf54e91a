//! The `/inspect` slash command (`POST /webhooks/slack/commands`, a signed form): what it
//! asks and what the bot answers, only to the person who typed it. Pure.

/// A slash command's invocation, the fields the bot uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// `/inspect` (whatever name the App gave it).
    pub command: String,
    pub text: String,
    pub user_id: String,
    pub user_name: String,
    pub team_id: String,
    pub channel_id: String,
}

/// What the person asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ask {
    /// `link`: a one-time link that makes this Slack user the signed-in person who opens it.
    Link,
    /// Anything else (or nothing): how to use the bot.
    Help,
}

/// Reads a delivery's form body; an error says what is missing.
pub fn read(form: &[u8]) -> Result<Command, String> {
    let mut command = Command {
        command: String::new(),
        text: String::new(),
        user_id: String::new(),
        user_name: String::new(),
        team_id: String::new(),
        channel_id: String::new(),
    };
    for (k, v) in url::form_urlencoded::parse(form) {
        let v = v.into_owned();
        match k.as_ref() {
            "command" => command.command = v,
            "text" => command.text = v,
            "user_id" => command.user_id = v,
            "user_name" => command.user_name = v,
            "team_id" => command.team_id = v,
            "channel_id" => command.channel_id = v,
            _ => {}
        }
    }
    let plain_user = !command.user_id.is_empty()
        && command.user_id.len() <= 32
        && command.user_id.chars().all(|c| c.is_ascii_alphanumeric());
    if !plain_user {
        return Err("a slash command needs the user_id of who typed it".into());
    }
    if command.command.is_empty() {
        return Err("a slash command needs its command".into());
    }
    Ok(command)
}

/// Whether a message to the bot (a DM, a mention, the command's text) asks to link.
pub fn asks_to_link(text: &str) -> bool {
    let words: Vec<String> = text
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .filter(|w| !w.is_empty())
        .collect();
    matches!(
        words
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .as_slice(),
        ["link"] | ["link", "me"] | ["link", "my", "account"]
    )
}

pub fn ask(command: &Command) -> Ask {
    if asks_to_link(&command.text) {
        Ask::Link
    } else {
        Ask::Help
    }
}

/// The private answer with a link code's page.
pub fn link_text(url: &str) -> String {
    format!(
        "<{url}|Link your Slack account> to the person you sign in as. Open it within 10 minutes, \
         signed in; it works once. Until it is linked, sessions you start here are your Slack \
         user's, and pull requests are opened by the App."
    )
}

pub fn help_text(command: &str) -> String {
    format!(
        "Mention the bot with a request to start a session in a thread. `{command} link` links \
         your Slack account to the person you sign in as, so your sessions and pull requests \
         are yours."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    // Slack's documented example of a slash command's payload (api.slack.com,
    // "Implementing slash commands"), form-encoded as sent.
    const EXAMPLE: &str = "token=gIkuvaNzQIHg97ATvDxqgjtO&team_id=T0001&team_domain=example\
        &enterprise_id=E0001&enterprise_name=Globular%20Construct%20Inc&channel_id=C2147483705\
        &channel_name=test&user_id=U2147483697&user_name=Steve&command=/weather&text=94070\
        &response_url=https://hooks.slack.com/commands/1234/5678&trigger_id=13345224609.738474920.8088930838d88f008e0\
        &api_app_id=A123456";

    #[test]
    fn slacks_example_reads_and_asks_for_help() {
        let c = read(EXAMPLE.as_bytes()).unwrap();
        assert_eq!(c.user_id, "U2147483697");
        assert_eq!(c.user_name, "Steve");
        assert_eq!(c.command, "/weather");
        assert_eq!(c.team_id, "T0001");
        assert_eq!(c.channel_id, "C2147483705");
        assert_eq!(ask(&c), Ask::Help);
        let link = read(b"command=%2Finspect&text=link&user_id=U1&user_name=ann").unwrap();
        assert_eq!(ask(&link), Ask::Link);
    }

    #[test]
    fn what_counts_as_asking_to_link() {
        for yes in ["link", " Link ", "link me", "link my account", "LINK!"] {
            assert!(asks_to_link(yes), "{yes}");
        }
        for no in [
            "",
            "link the footer to the page",
            "unlink",
            "please fix the link",
        ] {
            assert!(!asks_to_link(no), "{no}");
        }
        assert!(read(b"command=%2Finspect&text=link").is_err());
        assert!(read(b"command=%2Finspect&user_id=U1%20x").is_err());
        assert!(read(b"user_id=U1").is_err());
    }
}
