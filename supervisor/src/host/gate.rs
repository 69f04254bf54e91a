//! The local host's tunnelled ports, each behind a gate: a request must carry the session
//! page's link token (swapped here for a cookie) or that cookie, both signed with the host's
//! secret for this sandbox and port ([`inspect_ports`]); anything else gets 401. Once a
//! connection's first request passes, the rest of it is spliced to the server in the
//! sandbox as it is (keep-alive, WebSocket upgrades). The request head is read with
//! `httparse`.

use super::head::{answer, read_head, Head};
use inspect_ports::{check, cookie_name, sign, Kind, COOKIE_TTL_SECS, LINK_PARAM};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixStream};

pub struct Gate {
    pub key: Arc<Vec<u8>>,
    pub sandbox_id: String,
    /// The port in the sandbox, and the one this gate listens on.
    pub port: u16,
    pub public_port: u16,
    /// A sandbox in a network of its own is reached through this socket of its supervisor
    /// ([`crate::run::egress`]'s inbound relay); `None`: on this host's loopback.
    pub inbound: Option<Arc<PathBuf>>,
}

/// A connection to the sandbox's server, however it is reached.
pub trait Duplex: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Duplex for T {}

/// Asks a sandbox's inbound relay for `port`: two bytes of port, one byte back (0: the
/// server answered, and the rest of the stream is its).
pub async fn through_inbound(socket: &std::path::Path, port: u16) -> Option<UnixStream> {
    let mut s = UnixStream::connect(socket).await.ok()?;
    s.write_all(&port.to_be_bytes()).await.ok()?;
    let mut ok = [1u8; 1];
    s.read_exact(&mut ok).await.ok()?;
    (ok[0] == 0).then_some(s)
}

/// How long a request waits for the sandbox's server to listen.
const UPSTREAM_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// What the first request of a connection gets.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A link token: set the cookie and send the browser to the same path without it.
    SetCookie {
        location: String,
        cookie: String,
    },
    /// A valid cookie: through to the server.
    Pass,
    Refuse(&'static str),
}

impl Gate {
    /// Decides on one request head.
    pub fn judge(&self, head: &[u8], now: u64) -> Verdict {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return Verdict::Refuse("400 Bad Request"),
        }
        let path = req.path.unwrap_or("/");
        let (route, query) = path.split_once('?').unwrap_or((path, ""));
        let mut kept = Vec::new();
        let mut link = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair
                .strip_prefix(LINK_PARAM)
                .and_then(|r| r.strip_prefix('='))
            {
                Some(token) => link = Some(token),
                None => kept.push(pair),
            }
        }
        if let Some(token) = link {
            if !check(
                &self.key,
                Kind::Link,
                &self.sandbox_id,
                self.port,
                token,
                now,
            ) {
                return Verdict::Refuse("401 Unauthorized");
            }
            let cookie = sign(
                &self.key,
                Kind::Cookie,
                &self.sandbox_id,
                self.port,
                now + COOKIE_TTL_SECS,
            );
            let location = if kept.is_empty() {
                route.to_owned()
            } else {
                format!("{route}?{}", kept.join("&"))
            };
            return Verdict::SetCookie { location, cookie };
        }
        let name = cookie_name(self.public_port);
        let carried = req
            .headers
            .iter()
            .filter(|h| h.name.eq_ignore_ascii_case("cookie"))
            .filter_map(|h| std::str::from_utf8(h.value).ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|c| c.trim().split_once('='))
            .any(|(n, v)| {
                n == name && check(&self.key, Kind::Cookie, &self.sandbox_id, self.port, v, now)
            });
        if carried {
            Verdict::Pass
        } else {
            Verdict::Refuse("401 Unauthorized")
        }
    }

    /// Serves connections until the listener is dropped (with the sandbox).
    pub async fn serve(self, listener: TcpListener) {
        let gate = Arc::new(self);
        while let Ok((inbound, _)) = listener.accept().await {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move {
                let _ = gate.connection(inbound).await;
            });
        }
    }

    /// The server in the sandbox. A server that is still starting (the editor, asked for a
    /// moment ago; the app from `start.sh`) is waited for a little while.
    async fn upstream(&self) -> Option<Box<dyn Duplex>> {
        let deadline = tokio::time::Instant::now() + UPSTREAM_WAIT;
        loop {
            let connected: Option<Box<dyn Duplex>> = match &self.inbound {
                Some(socket) => through_inbound(socket, self.port)
                    .await
                    .map(|s| Box::new(s) as Box<dyn Duplex>),
                None => TcpStream::connect(("127.0.0.1", self.port))
                    .await
                    .ok()
                    .map(|s| Box::new(s) as Box<dyn Duplex>),
            };
            match connected {
                Some(s) => return Some(s),
                None if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await
                }
                None => return None,
            }
        }
    }

    async fn connection(&self, mut inbound: TcpStream) -> std::io::Result<()> {
        let head = match read_head(&mut inbound).await? {
            Head::Complete { bytes, .. } => bytes,
            Head::TooLarge => {
                return answer(&mut inbound, "431 Request Header Fields Too Large", &[], "").await
            }
            Head::Closed => return Ok(()),
        };
        match self.judge(&head, now_s()) {
            Verdict::Pass => {
                let Some(mut outbound) = self.upstream().await else {
                    return answer(
                        &mut inbound,
                        "502 Bad Gateway",
                        &[],
                        "Nothing in the sandbox answers on this port (yet).\n",
                    )
                    .await;
                };
                outbound.write_all(&head).await?;
                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await?;
                Ok(())
            }
            Verdict::SetCookie { location, cookie } => {
                let set = format!(
                    "{}={cookie}; Path=/; HttpOnly; SameSite=Lax; Max-Age={COOKIE_TTL_SECS}",
                    cookie_name(self.public_port)
                );
                answer(
                    &mut inbound,
                    "302 Found",
                    &[("Location", &location), ("Set-Cookie", &set)],
                    "",
                )
                .await
            }
            Verdict::Refuse(status) => {
                answer(
                    &mut inbound,
                    status,
                    &[],
                    "This port is for the session's people: open it from the session page.\n",
                )
                .await
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn gate() -> Gate {
        Gate {
            key: Arc::new(b"secret".to_vec()),
            sandbox_id: "sb_1".into(),
            port: 3000,
            public_port: 41000,
            inbound: None,
        }
    }

    #[test]
    fn a_link_becomes_a_cookie_and_the_cookie_lets_requests_through() {
        let g = gate();
        let link = sign(b"secret", Kind::Link, "sb_1", 3000, 500);
        let head = format!("GET /app?x=1&{LINK_PARAM}={link} HTTP/1.1\r\nHost: h\r\n\r\n");
        let Verdict::SetCookie { location, cookie } = g.judge(head.as_bytes(), 100) else {
            panic!("no cookie");
        };
        assert_eq!(location, "/app?x=1");
        let with = format!("GET /app HTTP/1.1\r\nCookie: a=b; inspect_port_41000={cookie}\r\n\r\n");
        assert_eq!(g.judge(with.as_bytes(), 200), Verdict::Pass);
        // Stale link, another port's cookie, none, garbage.
        let stale = format!("GET /?{LINK_PARAM}={link} HTTP/1.1\r\n\r\n");
        assert!(matches!(g.judge(stale.as_bytes(), 600), Verdict::Refuse(_)));
        let other = sign(b"secret", Kind::Cookie, "sb_1", 3001, 10_000);
        let wrong = format!("GET / HTTP/1.1\r\nCookie: inspect_port_41000={other}\r\n\r\n");
        assert!(matches!(g.judge(wrong.as_bytes(), 200), Verdict::Refuse(_)));
        let link_as_cookie = format!("GET / HTTP/1.1\r\nCookie: inspect_port_41000={link}\r\n\r\n");
        assert!(matches!(
            g.judge(link_as_cookie.as_bytes(), 200),
            Verdict::Refuse(_)
        ));
        assert!(matches!(
            g.judge(b"GET / HTTP/1.1\r\n\r\n", 200),
            Verdict::Refuse(_)
        ));
        assert_eq!(
            g.judge(b"\x00\x01 nonsense\r\n\r\n", 200),
            Verdict::Refuse("400 Bad Request")
        );
    }
}
