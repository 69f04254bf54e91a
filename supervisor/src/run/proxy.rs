//! The supervisor's own socket through the sandbox's HTTP proxy. Its HTTP calls go through
//! `HTTP_PROXY`/`HTTPS_PROXY` by themselves (reqwest reads them); its WebSocket library does
//! not, so in a sandbox whose only way out is a proxy (an environment's egress policy) the
//! session's socket asks the proxy for a tunnel (`CONNECT`) and speaks TLS and WebSocket
//! through it. The proxy's answer is read by `httparse`.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The proxy the environment names for a `scheme://host` (`HTTPS_PROXY` for https and wss,
/// `HTTP_PROXY` for http and ws, either spelling, else `ALL_PROXY`), unless `NO_PROXY`
/// names the host (`*`, the host, or a domain it is under).
pub fn proxy_for(scheme: &str, host: &str, var: &dyn Fn(&str) -> Option<String>) -> Option<Proxy> {
    let get = |name: &str| {
        var(name)
            .or_else(|| var(&name.to_ascii_lowercase()))
            .filter(|v| !v.trim().is_empty())
    };
    if let Some(no) = get("NO_PROXY") {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let excluded = no.split(',').map(str::trim).any(|e| {
            let e = e.trim_start_matches('.');
            e == "*"
                || e.eq_ignore_ascii_case(host)
                || (host.len() > e.len()
                    && host[host.len() - e.len()..].eq_ignore_ascii_case(e)
                    && host.as_bytes()[host.len() - e.len() - 1] == b'.')
        });
        if excluded {
            return None;
        }
    }
    let secure = matches!(scheme, "https" | "wss");
    let url =
        get(if secure { "HTTPS_PROXY" } else { "HTTP_PROXY" }).or_else(|| get("ALL_PROXY"))?;
    let url = if url.contains("://") {
        url
    } else {
        format!("http://{url}")
    };
    let (host, port) = inspect_protocol::egress::Reach::origin_of(&url)?;
    // `user:password@` before the host: the proxy's Basic credentials (a cluster's grant).
    let credentials = url
        .split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?']).next())
        .and_then(|authority| authority.rsplit_once('@'))
        .map(|(userinfo, _)| userinfo.to_owned());
    Some(Proxy {
        host,
        port,
        credentials,
    })
}

/// A proxy's address, and the credentials its URL carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proxy {
    pub host: String,
    pub port: u16,
    pub credentials: Option<String>,
}

/// A tunnel to `host:port` through `proxy`: the stream once it answered 200.
pub async fn tunnel(proxy: &Proxy, host: &str, port: u16) -> std::io::Result<TcpStream> {
    use base64::Engine;
    let mut s = TcpStream::connect((proxy.host.as_str(), proxy.port)).await?;
    let authority = if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    };
    let auth = proxy
        .credentials
        .as_ref()
        .map(|c| {
            format!(
                "Proxy-Authorization: Basic {}\r\n",
                base64::engine::general_purpose::STANDARD.encode(c)
            )
        })
        .unwrap_or_default();
    s.write_all(
        format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n{auth}\r\n").as_bytes(),
    )
    .await?;
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    // Byte by byte: nothing past the answer's head may be taken from the tunnel.
    loop {
        if s.read(&mut byte).await? == 0 {
            return Err(std::io::Error::other("the proxy closed before answering"));
        }
        head.push(byte[0]);
        if head.ends_with(b"\r\n\r\n") {
            break;
        }
        if head.len() > 16 * 1024 {
            return Err(std::io::Error::other("the proxy's answer is too long"));
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut answer = httparse::Response::new(&mut headers);
    match answer.parse(&head) {
        Ok(httparse::Status::Complete(_)) if answer.code == Some(200) => Ok(s),
        Ok(httparse::Status::Complete(_)) => Err(std::io::Error::other(format!(
            "the proxy refused the tunnel to {authority}: {} {}",
            answer.code.unwrap_or_default(),
            answer.reason.unwrap_or_default()
        ))),
        _ => Err(std::io::Error::other("the proxy's answer does not read")),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn the_proxy_is_the_schemes_unless_the_host_is_excluded() {
        let e = env(&[
            ("https_proxy", "http://127.0.0.1:3128"),
            ("HTTP_PROXY", "127.0.0.1:3129"),
            ("NO_PROXY", "localhost,127.0.0.1,.internal.example"),
        ]);
        let at = |host: &str, port: u16, credentials: Option<&str>| {
            Some(Proxy {
                host: host.into(),
                port,
                credentials: credentials.map(str::to_owned),
            })
        };
        assert_eq!(
            proxy_for("wss", "cp.workers.dev", &e),
            at("127.0.0.1", 3128, None)
        );
        assert_eq!(
            proxy_for("ws", "cp.example", &e),
            at("127.0.0.1", 3129, None)
        );
        let granted = env(&[("HTTPS_PROXY", "http://sb_1:00ab.cd@10.0.0.5:3128")]);
        assert_eq!(
            proxy_for("wss", "cp.example", &granted),
            at("10.0.0.5", 3128, Some("sb_1:00ab.cd"))
        );
        assert_eq!(proxy_for("wss", "127.0.0.1", &e), None);
        assert_eq!(proxy_for("wss", "a.internal.example", &e), None);
        assert_eq!(proxy_for("wss", "x.io", &env(&[])), None);
    }

    #[tokio::test]
    async fn a_tunnel_carries_the_socket_and_a_refusal_is_said() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            for answer in [
                "HTTP/1.1 200 Connection Established\r\n\r\n",
                "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n",
            ] {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 1024];
                let n = s.read(&mut buf).await.unwrap();
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                assert!(head.starts_with("CONNECT cp.example:443 "), "{head}");
                // "sb_1:grant" in Basic.
                assert!(
                    head.contains("Proxy-Authorization: Basic c2JfMTpncmFudA=="),
                    "{head}"
                );
                s.write_all(answer.as_bytes()).await.unwrap();
                s.write_all(b"tunnelled").await.unwrap();
            }
        });
        let proxy = Proxy {
            host: "127.0.0.1".into(),
            port,
            credentials: Some("sb_1:grant".into()),
        };
        let mut s = tunnel(&proxy, "cp.example", 443).await.unwrap();
        let mut got = [0u8; 9];
        s.read_exact(&mut got).await.unwrap();
        assert_eq!(&got, b"tunnelled");
        let refused = tunnel(&proxy, "cp.example", 443).await.unwrap_err();
        assert!(refused.to_string().contains("403"), "{refused}");
    }
}
