//! Where a sandbox's traffic may go: an environment's egress policy, its check on save, and
//! the one decision the proxy in front of a confined sandbox makes for each request.
//!
//! `open` lets everything out (the default, as before policies existed). `off` lets out
//! only what the session itself needs (the control plane, the model, the repositories'
//! git host: [`Reach`], set by the control plane, never by a person) and the hosts the
//! policy names: an allow-list of host names, a `*.` wildcard for subdomains, an optional
//! port and, optionally, the methods plain-HTTP requests may use, plus named presets.
//! Pure, so the Worker checks what a person saves with the same code the proxy decides by.

use serde::{Deserialize, Serialize};

/// At most this many entries in one allow-list.
pub const MAX_EGRESS_RULES: usize = 100;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum EgressMode {
    /// Anything the sandbox's host can reach.
    #[default]
    Open,
    /// Only what the session needs, and the allow-list.
    Off,
}

/// A named list of hosts a policy may take whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum EgressPreset {
    /// The public package registries: npm, PyPI, crates.io, Go's proxy, RubyGems, Maven
    /// Central, Debian's mirrors.
    PackageRegistries,
}

impl EgressPreset {
    pub fn hosts(self) -> &'static [&'static str] {
        match self {
            EgressPreset::PackageRegistries => &[
                "registry.npmjs.org",
                "registry.yarnpkg.com",
                "pypi.org",
                "files.pythonhosted.org",
                "crates.io",
                "index.crates.io",
                "static.crates.io",
                "proxy.golang.org",
                "sum.golang.org",
                "rubygems.org",
                "repo.maven.apache.org",
                "repo1.maven.org",
                "deb.debian.org",
            ],
        }
    }
}

/// One allow-list entry: `host` is `name`, `*.name` (its subdomains) or either with
/// `:port`; `methods`, when given, are the plain-HTTP methods allowed (an HTTPS tunnel
/// hides its method, so a host whose entry names methods takes no tunnel).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EgressRule {
    pub host: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub methods: Vec<String>,
}

/// An environment's egress policy.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct EgressPolicy {
    #[serde(default)]
    pub mode: EgressMode,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<EgressRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub presets: Vec<EgressPreset>,
}

/// A request the proxy was asked to carry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Destination<'a> {
    /// As the request named it (a CONNECT's authority or an absolute URL's host).
    pub host: &'a str,
    pub port: u16,
    /// `CONNECT` for a tunnel, else the plain-HTTP request's method.
    pub method: &'a str,
}

/// What the proxy does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused, with why in words (shown on the session's timeline).
    Refuse(String),
}

/// What a session needs to reach whatever its policy says: `host:port` origins, set by the
/// control plane and the host from the spawn request (the control plane, the model's
/// servers, the repositories' git host), never by a person.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    pub origins: Vec<(String, u16)>,
}

impl Reach {
    /// The origin of an `http(s)://` URL, if it is one (with the scheme's port when none
    /// is written).
    pub fn origin_of(url: &str) -> Option<(String, u16)> {
        let (scheme, rest) = url.split_once("://")?;
        let default = match scheme.to_ascii_lowercase().as_str() {
            "http" => 80,
            "https" => 443,
            _ => return None,
        };
        let authority = rest.split(['/', '?', '#']).next()?;
        let authority = authority.rsplit('@').next()?;
        let (host, port) = split_host_port(authority)?;
        Some((host.to_ascii_lowercase(), port.unwrap_or(default)))
    }

    pub fn add_url(&mut self, url: &str) {
        if let Some(o) = Self::origin_of(url) {
            if !self.origins.contains(&o) {
                self.origins.push(o);
            }
        }
    }

    fn holds(&self, host: &str, port: u16) -> bool {
        self.origins
            .iter()
            .any(|(h, p)| *p == port && h.eq_ignore_ascii_case(host))
    }
}

/// `host`, `host:port` or `[v6]:port` split; `None` when the port does not read.
fn split_host_port(authority: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after.strip_prefix(':') {
            Some(p) => Some((host, Some(p.parse().ok()?))),
            None if after.is_empty() => Some((host, None)),
            None => None,
        };
    }
    match authority.rsplit_once(':') {
        Some((host, port)) => Some((host, Some(port.parse().ok()?))),
        None => Some((authority, None)),
    }
}

/// Whether `host` is an IP address written out (v4, v6, or v4 in a short or numeric form
/// a resolver would take, such as `2130706433` or `127.1`).
pub fn is_address(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    if h.parse::<std::net::IpAddr>().is_ok() || h.contains(':') {
        return true;
    }
    // Every label numeric (decimal, octal or hex): an address in one of inet_aton's forms.
    !h.is_empty()
        && h.split('.').all(|l| {
            !l.is_empty()
                && (l.chars().all(|c| c.is_ascii_digit())
                    || l.strip_prefix("0x")
                        .or_else(|| l.strip_prefix("0X"))
                        .is_some_and(|x| x.chars().all(|c| c.is_ascii_hexdigit())))
        })
}

/// Whether `name` is a host name a resolver would look up as it is: ASCII letters, digits
/// and hyphens in labels of 1–63, at most 253 in all (what DNS allows; a name built to
/// carry data out in its labels past that is refused before any lookup).
pub fn is_host_name(name: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        })
}

/// The methods a rule may name.
const METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

impl EgressRule {
    /// The rule's host pattern and port, read.
    fn parts(&self) -> Option<(&str, Option<u16>)> {
        split_host_port(self.host.trim())
    }

    /// Why this entry cannot be saved, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        let raw = self.host.trim();
        if raw == "*" || raw == "*.*" || raw.starts_with("*:") {
            return Err("a bare `*` allows every host: set the mode to `open` instead".to_owned());
        }
        if raw.contains('/') {
            return Err(format!(
                "`{raw}` is an address range or a URL: name hosts (or set the mode to `open`)"
            ));
        }
        let Some((pattern, _)) = self.parts() else {
            return Err(format!("`{raw}` has a port that does not read"));
        };
        if is_address(pattern) {
            return Err(format!(
                "`{raw}` is an IP address: name the host (or set the mode to `open`)"
            ));
        }
        let name = pattern.strip_prefix("*.").unwrap_or(pattern);
        if name.contains('*') {
            return Err(format!(
                "`{raw}`: a wildcard is only a leading `*.` (all of a domain's subdomains)"
            ));
        }
        if !is_host_name(name) {
            return Err(format!("`{raw}` is not a host name"));
        }
        if pattern.starts_with("*.") && !name.contains('.') {
            return Err(format!(
                "`{raw}` covers a whole top-level domain: name the domain"
            ));
        }
        for m in &self.methods {
            if !METHODS.contains(&m.as_str()) {
                return Err(format!(
                    "`{m}` is not a method an entry may name ({})",
                    METHODS.join(", ")
                ));
            }
        }
        Ok(())
    }

    /// Whether this entry covers `host:port` (not yet the method).
    fn covers(&self, host: &str, port: u16) -> bool {
        let Some((pattern, want_port)) = self.parts() else {
            return false;
        };
        if want_port.is_some_and(|p| p != port) {
            return false;
        }
        let host = host.strip_suffix('.').unwrap_or(host);
        match pattern.strip_prefix("*.") {
            Some(domain) => {
                host.len() > domain.len() + 1
                    && host[host.len() - domain.len()..].eq_ignore_ascii_case(domain)
                    && host.as_bytes()[host.len() - domain.len() - 1] == b'.'
            }
            None => pattern.eq_ignore_ascii_case(host),
        }
    }
}

impl EgressPolicy {
    /// Why this policy cannot be saved, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.mode == EgressMode::Open && (!self.allow.is_empty() || !self.presets.is_empty()) {
            return Err(
                "`open` lets everything out: an allow-list or a preset goes with `off`".into(),
            );
        }
        if self.allow.len() > MAX_EGRESS_RULES {
            return Err(format!(
                "an allow-list holds at most {MAX_EGRESS_RULES} entries"
            ));
        }
        for rule in &self.allow {
            rule.check()?;
        }
        Ok(())
    }

    /// Whether this policy confines a sandbox at all.
    pub fn confines(&self) -> bool {
        self.mode != EgressMode::Open
    }

    /// The hosts this policy lets out, in words (for the boot step and the docs).
    pub fn describe(&self) -> String {
        match self.mode {
            EgressMode::Open => "open".into(),
            EgressMode::Off => {
                let mut named: Vec<String> = self.allow.iter().map(|r| r.host.clone()).collect();
                named.extend(self.presets.iter().map(|p| match p {
                    EgressPreset::PackageRegistries => "the package registries".to_owned(),
                }));
                if named.is_empty() {
                    "off".into()
                } else {
                    format!("off but {}", named.join(", "))
                }
            }
        }
    }

    /// The one decision for a request to `to`; `reach` is what the session itself needs.
    pub fn decide(&self, reach: &Reach, to: Destination<'_>) -> Decision {
        let host = to.host.trim_start_matches('[').trim_end_matches(']');
        if reach.holds(host, to.port) {
            return Decision::Allow;
        }
        if self.mode == EgressMode::Open {
            return Decision::Allow;
        }
        if is_address(host) {
            return Decision::Refuse(format!(
                "{host} is an IP address: this environment lets out only named hosts"
            ));
        }
        if !is_host_name(host) {
            return Decision::Refuse("not a host name a resolver would take".into());
        }
        let preset = self.presets.iter().any(|p| {
            p.hosts()
                .iter()
                .any(|h| h.eq_ignore_ascii_case(host.strip_suffix('.').unwrap_or(host)))
        }) && matches!(to.port, 80 | 443);
        if preset {
            return Decision::Allow;
        }
        let covering: Vec<&EgressRule> = self
            .allow
            .iter()
            .filter(|r| r.covers(host, to.port))
            .collect();
        if covering.is_empty() {
            return Decision::Refuse("not on this environment's allow-list".into());
        }
        let method_ok = covering.iter().any(|r| {
            r.methods.is_empty() || r.methods.iter().any(|m| m.eq_ignore_ascii_case(to.method))
        });
        if method_ok {
            Decision::Allow
        } else if to.method == "CONNECT" {
            Decision::Refuse(
                "its entry allows only some methods, which an HTTPS tunnel hides".into(),
            )
        } else {
            Decision::Refuse(format!("{} is not among its entry's methods", to.method))
        }
    }
}

/// What a shared egress proxy (a cluster's) is told of one sandbox, signed by the control
/// plane: its policy and what it needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressGrant {
    pub policy: EgressPolicy,
    pub reach: Vec<(String, u16)>,
}

/// The variable a cloud provider sets for the supervisor when the vendor's own firewall
/// enforces the policy (its value says which, in words).
pub const ENFORCED_BY_VAR: &str = "INSPECT_EGRESS_ENFORCED_BY";

/// The settings that name a model server a sandbox calls.
pub const MODEL_URL_VARS: &[&str] = &["INSPECT_MODEL_BASE_URL", "INSPECT_ANTHROPIC_BASE_URL"];

/// A policy as a cloud vendor's firewall takes it: the host names (a `*.` wildcard kept)
/// and the addresses (as `/32` or `/128` ranges) let out; ports and methods are not its to
/// tell apart. `None` for `open`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VendorAllowList {
    pub domains: Vec<String>,
    pub cidrs: Vec<String>,
}

impl EgressPolicy {
    pub fn for_vendor(&self, reach: &Reach) -> Option<VendorAllowList> {
        if !self.confines() {
            return None;
        }
        let mut out = VendorAllowList {
            domains: Vec::new(),
            cidrs: Vec::new(),
        };
        let mut add_name = |name: &str| {
            let name = name.to_ascii_lowercase();
            if !out.domains.contains(&name) {
                out.domains.push(name);
            }
        };
        for (host, _) in &reach.origins {
            if !is_address(host) {
                add_name(host);
            }
        }
        for rule in &self.allow {
            if let Some((pattern, _)) = rule.parts() {
                add_name(pattern);
            }
        }
        for preset in &self.presets {
            for host in preset.hosts() {
                add_name(host);
            }
        }
        for (host, _) in reach.origins.iter().filter(|(h, _)| is_address(h)) {
            let cidr = match host.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) => format!("{host}/32"),
                Ok(std::net::IpAddr::V6(_)) => format!("{host}/128"),
                Err(_) => continue,
            };
            if !out.cidrs.contains(&cidr) {
                out.cidrs.push(cidr);
            }
        }
        Some(out)
    }
}

/// Model vendors' API hosts, by the provider part of a `provider/model` name: a session's
/// model is what it needs, whatever its policy.
pub fn model_hosts(provider: &str) -> &'static [&'static str] {
    match provider {
        "anthropic" => &["api.anthropic.com"],
        "openai" => &["api.openai.com"],
        "google" => &["generativelanguage.googleapis.com"],
        "openrouter" => &["openrouter.ai"],
        "xai" => &["api.x.ai"],
        "groq" => &["api.groq.com"],
        "mistral" => &["api.mistral.ai"],
        "deepseek" => &["api.deepseek.com"],
        _ => &[],
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rule(h: &str) -> EgressRule {
        EgressRule {
            host: h.into(),
            methods: vec![],
        }
    }

    fn off(rules: Vec<EgressRule>) -> EgressPolicy {
        EgressPolicy {
            mode: EgressMode::Off,
            allow: rules,
            presets: vec![],
        }
    }

    fn to<'a>(host: &'a str, port: u16, method: &'a str) -> Destination<'a> {
        Destination { host, port, method }
    }

    #[test]
    fn entries_that_are_not_host_names_are_refused_with_the_reason() {
        for (entry, says) in [
            ("*", "`open`"),
            ("*:443", "`open`"),
            ("10.0.0.0/8", "address range"),
            ("10.0.0.1", "IP address"),
            ("[::1]:80", "IP address"),
            ("2130706433", "IP address"),
            ("a.*.com", "leading `*.`"),
            ("*.com", "top-level"),
            ("exa mple.com", "not a host name"),
            ("example.com:http", "port"),
            (&"a".repeat(64), "not a host name"),
        ] {
            let err = rule(entry).check().unwrap_err();
            assert!(err.contains(says), "{entry}: {err}");
        }
        for fine in [
            "example.com",
            "*.example.com",
            "localhost:5432",
            "a-b.c.io:443",
        ] {
            rule(fine).check().unwrap();
        }
        let bad_method = EgressRule {
            host: "x.io".into(),
            methods: vec!["TRACE".into()],
        };
        assert!(bad_method.check().is_err());
        let open_with_list = EgressPolicy {
            mode: EgressMode::Open,
            allow: vec![rule("x.io")],
            presets: vec![],
        };
        assert!(open_with_list.check().unwrap_err().contains("`off`"));
    }

    #[test]
    fn off_lets_out_what_the_session_needs_and_the_list_alone() {
        let mut reach = Reach::default();
        reach.add_url("http://127.0.0.1:8787/sessions/x");
        reach.add_url("https://api.anthropic.com/v1");
        let p = off(vec![rule("*.example.com"), rule("localhost:9000")]);
        assert_eq!(
            p.decide(&reach, to("127.0.0.1", 8787, "GET")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&reach, to("api.anthropic.com", 443, "CONNECT")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&reach, to("api.example.com", 443, "CONNECT")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&reach, to("API.Example.com.", 80, "GET")),
            Decision::Allow
        );
        assert_eq!(
            p.decide(&reach, to("localhost", 9000, "GET")),
            Decision::Allow
        );
        for (host, port, says) in [
            ("example.com", 443, "allow-list"),
            ("evilexample.com", 443, "allow-list"),
            ("localhost", 9001, "allow-list"),
            ("127.0.0.1", 9000, "IP address"),
            ("127.1", 8787, "IP address"),
            ("[::1]", 9000, "IP address"),
            ("registry.npmjs.org", 443, "allow-list"),
        ] {
            match p.decide(&reach, to(host, port, "CONNECT")) {
                Decision::Refuse(why) => assert!(why.contains(says), "{host}: {why}"),
                Decision::Allow => panic!("{host}:{port} let out"),
            }
        }
        // A name built to carry data in its labels is no name.
        let long = format!("{}.example.com", "a".repeat(70));
        assert!(matches!(
            p.decide(&reach, to(&long, 443, "CONNECT")),
            Decision::Refuse(_)
        ));
        let mut with_preset = p.clone();
        with_preset.presets.push(EgressPreset::PackageRegistries);
        assert_eq!(
            with_preset.decide(&reach, to("registry.npmjs.org", 443, "CONNECT")),
            Decision::Allow
        );
        let open = EgressPolicy::default();
        assert_eq!(
            open.decide(&reach, to("1.2.3.4", 22, "CONNECT")),
            Decision::Allow
        );
    }

    #[test]
    fn methods_bind_plain_requests_and_refuse_tunnels() {
        let p = off(vec![EgressRule {
            host: "api.example.com".into(),
            methods: vec!["GET".into()],
        }]);
        let reach = Reach::default();
        assert_eq!(
            p.decide(&reach, to("api.example.com", 80, "GET")),
            Decision::Allow
        );
        assert!(matches!(
            p.decide(&reach, to("api.example.com", 80, "POST")),
            Decision::Refuse(_)
        ));
        assert!(matches!(
            p.decide(&reach, to("api.example.com", 443, "CONNECT")),
            Decision::Refuse(w) if w.contains("tunnel")
        ));
    }

    #[test]
    fn a_vendor_takes_the_names_and_the_session_needs() {
        let mut reach = Reach::default();
        reach.add_url("https://cp.example.workers.dev");
        reach.add_url("https://github.com/o/r.git");
        reach.add_url("http://10.1.2.3:8080/v1");
        let mut p = off(vec![rule("*.example.com:8443"), rule("GitHub.com")]);
        p.presets.push(EgressPreset::PackageRegistries);
        let v = p.for_vendor(&reach).unwrap();
        assert_eq!(
            &v.domains[..3],
            ["cp.example.workers.dev", "github.com", "*.example.com"]
        );
        assert!(v.domains.contains(&"registry.npmjs.org".to_owned()));
        assert_eq!(v.cidrs, ["10.1.2.3/32"]);
        assert_eq!(EgressPolicy::default().for_vendor(&reach), None);
    }

    #[test]
    fn origins_read_from_urls() {
        assert_eq!(
            Reach::origin_of("https://user:pw@GitHub.com/o/r.git"),
            Some(("github.com".into(), 443))
        );
        assert_eq!(
            Reach::origin_of("http://[::1]:8080/x"),
            Some(("::1".into(), 8080))
        );
        assert_eq!(Reach::origin_of("/local/path"), None);
        assert_eq!(Reach::origin_of("ssh://git@github.com/o/r"), None);
    }
}
