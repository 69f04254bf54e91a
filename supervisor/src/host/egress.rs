//! A confined sandbox's only way out. A sandbox whose environment's egress policy is not
//! `open` runs in a network namespace of its own (bubblewrap's `--unshare-net`: a loopback
//! and nothing else). Its supervisor relays (`supervisor/src/run/egress.rs`) to the unix sockets
//! this host serves in the sandbox's `net/` directory, which the sandbox sees read-only:
//!
//! - `proxy.sock`: an HTTP proxy (CONNECT tunnels and plain `http://` requests) that decides
//!   each request by [`EgressPolicy::decide`] before it resolves anything; a refused one is
//!   answered 403 and written, once per host, port and method, to `blocked.jsonl`, which
//!   the supervisor sends on as `egress_blocked` events;
//! - `port-N.sock`: the session's own services on this host's loopback (the control plane,
//!   the model, a git server), each reached on the same port inside the sandbox.
//!
//! The policy's check runs here, outside the sandbox: nothing in the sandbox can change it.

use super::head::{answer, read_head, Head};
use inspect_protocol::egress::{Decision, Destination, EgressPolicy, Reach};
use inspect_protocol::provider::SpawnRequest;
use inspect_protocol::sandbox::SandboxEvent;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener};
use tokio::task::JoinHandle;

/// The loopback port the sandbox's proxy relay listens on, unless the session's own
/// services take it.
pub const PROXY_PORT: u16 = 3128;
/// The file the host writes refused requests to, one JSON event a line.
pub const BLOCKED_FILE: &str = "blocked.jsonl";
/// At most this many distinct refusals are written for one sandbox.
const MAX_REPORTED: usize = 500;
/// Each direction of a relayed connection moves up to this much at a time (a clone's pack
/// crosses two relays: 8 KiB at a time cost it a sixth more than the host's own network).
pub const RELAY_BUFFER: usize = 256 * 1024;
/// How long a connection to an allowed host may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(15);

/// The directory, under a sandbox's own, that holds its way out.
pub fn net_dir(root: &Path) -> PathBuf {
    root.join("net")
}

/// What a session reaches whatever its policy ([`SpawnRequest::reach`]), and the model
/// servers this host's own settings name.
pub fn reach_of(req: &SpawnRequest) -> Reach {
    let mut reach = req.reach();
    for var in inspect_protocol::egress::MODEL_URL_VARS {
        if let Ok(url) = std::env::var(var) {
            reach.add_url(&url);
        }
    }
    reach
}

/// Whether `host` names this machine's loopback.
fn is_loopback_name(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<IpAddr>()
            .is_ok_and(|a| a.is_loopback())
}

/// The running way out of one sandbox: its tasks end when this is dropped.
pub struct Egress {
    pub tasks: Vec<JoinHandle<()>>,
    /// The port the sandbox's proxy relay listens on.
    pub proxy_port: u16,
}

/// The variables that point a sandbox's programs at its proxy (both spellings: curl reads
/// only the lower-case `http_proxy`); its own loopback is reached directly.
pub fn proxy_env(port: u16) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut vars = Vec::new();
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"] {
        vars.push((name.to_owned(), url.clone()));
        vars.push((name.to_ascii_lowercase(), url.clone()));
    }
    for name in ["NO_PROXY", "no_proxy"] {
        vars.push((name.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
    }
    vars
}

/// Starts the proxy and the loopback services' sockets in `root/net`.
pub fn start(root: &Path, policy: EgressPolicy, reach: Reach) -> anyhow::Result<Egress> {
    let dir = net_dir(root);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut tasks = Vec::new();
    let mut taken = HashSet::new();
    for (host, port) in reach.origins.iter().filter(|(h, _)| is_loopback_name(h)) {
        if !taken.insert(*port) {
            continue;
        }
        let listener = UnixListener::bind(dir.join(format!("port-{port}.sock")))?;
        let target = (
            host.trim_start_matches('[')
                .trim_end_matches(']')
                .to_owned(),
            *port,
        );
        tasks.push(tokio::spawn(async move {
            while let Ok((mut inside, _)) = listener.accept().await {
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut out) = TcpStream::connect((target.0.as_str(), target.1)).await {
                        let _ = tokio::io::copy_bidirectional_with_sizes(
                            &mut inside,
                            &mut out,
                            RELAY_BUFFER,
                            RELAY_BUFFER,
                        )
                        .await;
                    }
                });
            }
        }));
    }
    let proxy_port = (PROXY_PORT..)
        .find(|p| !taken.contains(p))
        .unwrap_or(PROXY_PORT);
    let proxy = Arc::new(Proxy::Fixed {
        policy,
        reach,
        report: Report {
            path: dir.join(BLOCKED_FILE),
            seen: Mutex::new(HashSet::new()),
        },
    });
    let listener = UnixListener::bind(dir.join("proxy.sock"))?;
    tasks.push(tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let proxy = Arc::clone(&proxy);
            tokio::spawn(async move {
                if let Err(e) = proxy.connection(conn).await {
                    tracing::debug!("egress proxy connection: {e}");
                }
            });
        }
    }));
    Ok(Egress { tasks, proxy_port })
}

pub struct Report {
    path: PathBuf,
    seen: Mutex<HashSet<String>>,
}

impl Report {
    /// Writes a refusal once per host, port and method.
    fn refused(&self, to: Destination<'_>, reason: &str) {
        let key = format!("{} {}:{}", to.method, to.host, to.port);
        {
            let Ok(mut seen) = self.seen.lock() else {
                return;
            };
            if seen.len() >= MAX_REPORTED || !seen.insert(key) {
                return;
            }
        }
        tracing::info!(
            host = to.host,
            port = to.port,
            method = to.method,
            reason,
            "egress refused"
        );
        let event = SandboxEvent::EgressBlocked {
            host: to.host.chars().take(300).collect(),
            port: to.port,
            method: to.method.chars().take(20).collect(),
            reason: reason.to_owned(),
        };
        let Ok(mut line) = serde_json::to_string(&event) else {
            return;
        };
        line.push('\n');
        use std::io::Write;
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("writing a refusal: {e}");
        }
    }
}

/// Whose policy a connection is decided by.
pub enum Proxy {
    /// One sandbox's, on the local host (its refusals written for its supervisor).
    Fixed {
        policy: EgressPolicy,
        reach: Reach,
        report: Report,
    },
    /// A cluster's shared proxy: each request names its sandbox and carries that sandbox's
    /// grant (its policy, signed by the control plane with this key) as the proxy's
    /// Basic credentials; refusals go to this proxy's log.
    Granted { key: Vec<u8> },
}

/// The policy, what the session needs, and where refusals go, for one request.
struct Decider<'a> {
    policy: std::borrow::Cow<'a, EgressPolicy>,
    reach: std::borrow::Cow<'a, Reach>,
    report: Option<&'a Report>,
    /// A cluster's proxy: its private ranges are not the sandbox's to reach.
    cluster: bool,
}

/// The sandbox and grant in a request's `Proxy-Authorization: Basic …`.
fn credentials(head: &[u8]) -> Option<(String, String)> {
    use base64::Engine;
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(head).ok()?;
    let value = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("proxy-authorization"))?
        .value;
    let value = std::str::from_utf8(value).ok()?;
    let (scheme, encoded) = value.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let (user, pass) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some((user.to_owned(), pass.to_owned()))
}

/// What one proxied request asks for.
struct Asked {
    host: String,
    port: u16,
    method: String,
    tunnel: bool,
}

/// Reads a proxy request's target: a CONNECT's `host:port`, or a plain request's absolute
/// `http://` URL.
fn asked(head: &[u8]) -> Result<Asked, &'static str> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        _ => return Err("the request does not read as HTTP"),
    }
    let method = req.method.unwrap_or_default().to_owned();
    let target = req.path.unwrap_or_default();
    if method == "CONNECT" {
        let (host, port) =
            Reach::origin_of(&format!("https://{target}")).ok_or("a CONNECT names host:port")?;
        if !target.contains(':') || target.ends_with(']') {
            return Err("a CONNECT names host:port");
        }
        return Ok(Asked {
            host,
            port,
            method,
            tunnel: true,
        });
    }
    if !target.to_ascii_lowercase().starts_with("http://") {
        return Err("a proxied request names an http:// URL (HTTPS goes through CONNECT)");
    }
    let (host, port) = Reach::origin_of(target).ok_or("the URL has no host")?;
    Ok(Asked {
        host,
        port,
        method,
        tunnel: false,
    })
}

/// The head sent on to an allowed plain-HTTP server: the request as it came, in origin
/// form (`/path?query`, as an origin server expects it from a proxy), its proxy headers
/// dropped, a `Host` if it had none, and `Connection: close` (the next request, maybe for
/// another host, comes on a new connection and is decided again).
fn forwarded_head(head: &[u8]) -> Option<Vec<u8>> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    let Ok(httparse::Status::Complete(_)) = req.parse(head) else {
        return None;
    };
    let target = req.path?;
    let after_scheme = target.split_once("://").map(|(_, r)| r).unwrap_or(target);
    let (authority, path) = match after_scheme.find(['/', '?']) {
        Some(i) => (&after_scheme[..i], &after_scheme[i..]),
        None => (after_scheme, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let mut out = format!(
        "{} {path} HTTP/1.{}\r\n",
        req.method?,
        req.version.unwrap_or(1)
    )
    .into_bytes();
    if !req
        .headers
        .iter()
        .any(|h| h.name.eq_ignore_ascii_case("host"))
    {
        out.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    for h in req.headers.iter() {
        let n = h.name.to_ascii_lowercase();
        if matches!(
            n.as_str(),
            "connection" | "proxy-connection" | "keep-alive" | "proxy-authorization"
        ) {
            continue;
        }
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Some(out)
}

/// Whether an address an allowed name resolved to may be reached: never a link-local one
/// (a cloud's metadata service), this machine's loopback only for `localhost` itself or
/// the session's own services (a name that resolves there is not let in by its pattern).
fn address_allowed(host: &str, addr: &SocketAddr, own: bool) -> bool {
    let ip = addr.ip();
    let link_local = match ip {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    };
    if own {
        return true;
    }
    if link_local || ip.is_unspecified() {
        return false;
    }
    !ip.is_loopback() || host.eq_ignore_ascii_case("localhost")
}

impl Proxy {
    /// Who decides `head`: the fixed sandbox's policy, or the grant the request carries
    /// (`None`: no valid grant).
    fn decider(&self, head: &[u8]) -> Option<Decider<'_>> {
        use std::borrow::Cow;
        match self {
            Proxy::Fixed {
                policy,
                reach,
                report,
            } => Some(Decider {
                policy: Cow::Borrowed(policy),
                reach: Cow::Borrowed(reach),
                report: Some(report),
                cluster: false,
            }),
            Proxy::Granted { key } => {
                let (sandbox, token) = credentials(head)?;
                let payload = inspect_ports::open_grant(key, &sandbox, &token)?;
                let grant: inspect_protocol::egress::EgressGrant =
                    serde_json::from_str(&payload).ok()?;
                Some(Decider {
                    policy: Cow::Owned(grant.policy),
                    reach: Cow::Owned(Reach {
                        origins: grant.reach,
                    }),
                    report: None,
                    cluster: true,
                })
            }
        }
    }

    /// Serves one client connection: one request decided, then carried or refused.
    pub async fn connection<S>(&self, mut conn: S) -> std::io::Result<()>
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let (bytes, len) = match read_head(&mut conn).await? {
            Head::Complete { bytes, len } => (bytes, len),
            Head::TooLarge => {
                return answer(&mut conn, "431 Request Header Fields Too Large", &[], "").await
            }
            Head::Closed => return Ok(()),
        };
        let ask = match asked(&bytes[..len]) {
            Ok(a) => a,
            Err(why) => {
                return answer(&mut conn, "400 Bad Request", &[], &format!("{why}\n")).await
            }
        };
        let Some(d) = self.decider(&bytes[..len]) else {
            return answer(
                &mut conn,
                "407 Proxy Authentication Required",
                &[("Proxy-Authenticate", "Basic realm=\"inspect-egress\"")],
                "a sandbox's grant is needed\n",
            )
            .await;
        };
        let to = Destination {
            host: &ask.host,
            port: ask.port,
            method: &ask.method,
        };
        let refused = |reason: &str| match d.report {
            Some(report) => report.refused(to, reason),
            None => tracing::info!(
                host = to.host,
                port = to.port,
                method = to.method,
                reason,
                "egress refused"
            ),
        };
        if let Decision::Refuse(reason) = d.policy.decide(&d.reach, to) {
            refused(&reason);
            return answer(
                &mut conn,
                "403 Forbidden",
                &[("X-Inspect-Egress", "blocked")],
                &format!(
                    "blocked {}:{} by this environment's egress policy: {reason}\n",
                    ask.host, ask.port
                ),
            )
            .await;
        }
        let own = d
            .reach
            .origins
            .iter()
            .any(|(h, p)| *p == ask.port && h.eq_ignore_ascii_case(&ask.host));
        let mut upstream = match connect(&ask.host, ask.port, own, d.cluster).await {
            Ok(s) => s,
            Err(why) => {
                if why.starts_with("refused") {
                    refused(&why);
                }
                return answer(&mut conn, "502 Bad Gateway", &[], &format!("{why}\n")).await;
            }
        };
        if ask.tunnel {
            conn.write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                .await?;
            upstream.write_all(&bytes[len..]).await?;
        } else {
            let Some(head) = forwarded_head(&bytes[..len]) else {
                return answer(&mut conn, "400 Bad Request", &[], "").await;
            };
            upstream.write_all(&head).await?;
            upstream.write_all(&bytes[len..]).await?;
        }
        let _ = tokio::io::copy_bidirectional_with_sizes(
            &mut conn,
            &mut upstream,
            RELAY_BUFFER,
            RELAY_BUFFER,
        )
        .await;
        Ok(())
    }
}

/// Resolves an allowed name and connects to the first address it may reach.
async fn connect(host: &str, port: u16, own: bool, cluster: bool) -> Result<TcpStream, String> {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((bare, port))
        .await
        .map_err(|e| format!("{host} does not resolve: {e}"))?
        .collect();
    let usable: Vec<SocketAddr> = addrs
        .iter()
        .filter(|a| address_allowed(host, a, own) && (own || !cluster || !is_private(a)))
        .copied()
        .collect();
    if usable.is_empty() {
        return Err(format!(
            "refused: {host} resolves only to addresses a sandbox may not reach"
        ));
    }
    let mut last = String::new();
    for addr in usable {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "timed out".into(),
        }
    }
    Err(format!("{host}:{port} did not answer: {last}"))
}

/// A cluster's own addresses (private, shared, unique-local): not a sandbox's to reach
/// through the cluster's proxy, as its NetworkPolicy keeps them from the sandbox itself.
fn is_private(addr: &SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(v4) => {
            v4.is_private() || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => (v6.segments()[0] & 0xfe00) == 0xfc00,
    }
}

/// `inspect-supervisor egress-proxy`: a cluster's shared proxy on `listen`, deciding each
/// request by the grant it carries (signed with `key`, `K8S_EGRESS_KEY` on the control
/// plane's side).
pub async fn serve_granted(listen: SocketAddr, key: Vec<u8>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(listen).await?;
    tracing::info!(%listen, "egress proxy listening");
    let proxy = Arc::new(Proxy::Granted { key });
    loop {
        let (conn, _) = listener.accept().await?;
        let proxy = Arc::clone(&proxy);
        tokio::spawn(async move {
            if let Err(e) = proxy.connection(conn).await {
                tracing::debug!("egress proxy connection: {e}");
            }
        });
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_request_names_its_target() {
        let c = asked(b"CONNECT api.example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        assert_eq!(
            (c.host.as_str(), c.port, c.tunnel),
            ("api.example.com", 443, true)
        );
        let g = asked(b"GET http://Example.com:8080/a?b HTTP/1.1\r\n\r\n").unwrap();
        assert_eq!(
            (g.host.as_str(), g.port, g.tunnel),
            ("example.com", 8080, false)
        );
        assert!(asked(b"GET /a HTTP/1.1\r\nHost: example.com\r\n\r\n").is_err());
        assert!(asked(b"GET https://example.com/ HTTP/1.1\r\n\r\n").is_err());
        assert!(asked(b"CONNECT example.com HTTP/1.1\r\n\r\n").is_err());
        assert!(asked(b"\x00\x01\r\n\r\n").is_err());
    }

    #[test]
    fn a_forwarded_request_closes_after_its_answer() {
        let head = forwarded_head(
            b"GET http://a.io/x HTTP/1.1\r\nHost: a.io\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic x\r\nAccept: */*\r\n\r\n",
        )
        .unwrap();
        let text = String::from_utf8(head).unwrap();
        assert_eq!(
            text,
            "GET /x HTTP/1.1\r\nHost: a.io\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
        let bare = forwarded_head(b"GET http://a.io:8080?q=1 HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(
            String::from_utf8(bare).unwrap(),
            "GET /?q=1 HTTP/1.0\r\nHost: a.io:8080\r\nConnection: close\r\n\r\n"
        );
    }

    /// The cluster's proxy: a request without a grant, with another sandbox's, or with
    /// one whose policy was changed gets 407; with its own, the policy decides.
    #[tokio::test]
    async fn a_clusters_proxy_decides_by_the_grant_each_request_carries() {
        use base64::Engine;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let grant = inspect_protocol::egress::EgressGrant {
            policy: serde_json::from_value(
                serde_json::json!({"mode": "off", "allow": [{"host": "api.example.org"}]}),
            )
            .unwrap(),
            reach: vec![],
        };
        let token =
            inspect_ports::seal_grant(b"k", "sb_1", &serde_json::to_string(&grant).unwrap());
        let proxy = Proxy::Granted { key: b"k".to_vec() };
        let ask = |user: &str, pass: &str, target: &str| {
            let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            format!("CONNECT {target} HTTP/1.1\r\nProxy-Authorization: Basic {basic}\r\n\r\n")
        };
        let proxy = &proxy;
        let run = |head: String| async move {
            let (mut client, server) = tokio::io::duplex(64 * 1024);
            let serving = proxy.connection(server);
            let talking = async {
                client.write_all(head.as_bytes()).await.unwrap();
                let mut out = String::new();
                let _ = client.read_to_string(&mut out).await;
                out
            };
            let (_, out) = tokio::join!(serving, talking);
            out
        };
        let none = run("CONNECT api.example.org:443 HTTP/1.1\r\n\r\n".into()).await;
        assert!(none.starts_with("HTTP/1.1 407"), "{none}");
        let other = run(ask("sb_2", &token, "api.example.org:443")).await;
        assert!(other.starts_with("HTTP/1.1 407"), "{other}");
        let forged = run(ask("sb_1", &token.replace('a', "b"), "api.example.org:443")).await;
        assert!(forged.starts_with("HTTP/1.1 407"), "{forged}");
        let refused = run(ask("sb_1", &token, "registry.example:443")).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
        assert!(refused.contains("allow-list"), "{refused}");
    }

    #[test]
    fn metadata_and_loopback_addresses_stay_out_of_reach() {
        let a = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(!address_allowed("x.io", &a("169.254.169.254:80"), false));
        assert!(!address_allowed("x.io", &a("127.0.0.1:80"), false));
        assert!(!address_allowed("x.io", &a("[fe80::1]:80"), false));
        assert!(address_allowed("localhost", &a("127.0.0.1:80"), false));
        assert!(address_allowed("x.io", &a("10.1.2.3:80"), false));
        assert!(address_allowed("x.io", &a("127.0.0.1:80"), true));
    }
}
