//! What the host's gates and its egress proxy share: a request head read off a connection
//! (parsed by `httparse`, never by hand), and a short plain-text answer.

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A request head bigger than this is refused.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;

/// What came in before the head's end, and where the head ends in it (bytes past it are
/// the start of the body or a tunnel's first bytes).
pub enum Head {
    Complete {
        bytes: Vec<u8>,
        len: usize,
    },
    TooLarge,
    /// The peer closed (or said nothing for 30 s) before a whole head.
    Closed,
}

/// Reads until a whole request head is in, as `httparse` sees it.
pub async fn read_head<S: AsyncRead + Unpin>(stream: &mut S) -> std::io::Result<Head> {
    let mut bytes = Vec::with_capacity(2048);
    let mut buf = [0u8; 4096];
    loop {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&bytes) {
            Ok(httparse::Status::Complete(len)) => return Ok(Head::Complete { bytes, len }),
            // A head that does not parse is answered by the caller's own parse.
            Err(_) => {
                let len = bytes.len();
                return Ok(Head::Complete { bytes, len });
            }
            Ok(httparse::Status::Partial) => {}
        }
        if bytes.len() > MAX_HEAD_BYTES {
            return Ok(Head::TooLarge);
        }
        let n =
            match tokio::time::timeout(std::time::Duration::from_secs(30), stream.read(&mut buf))
                .await
            {
                Ok(r) => r?,
                Err(_) => return Ok(Head::Closed),
            };
        if n == 0 {
            return Ok(Head::Closed);
        }
        bytes.extend_from_slice(&buf[..n]);
    }
}

/// A short plain-text answer, and the connection closed.
pub async fn answer<S: AsyncWrite + Unpin>(
    out: &mut S,
    status: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<()> {
    let mut text = format!("HTTP/1.1 {status}\r\nConnection: close\r\nCache-Control: no-store\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    out.write_all(text.as_bytes()).await?;
    out.shutdown().await
}
