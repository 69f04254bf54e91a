//! The App's private key as WebCrypto takes it.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use inspect_protocol::{ApiError, ErrorCode};

const BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const END: &str = "-----END PRIVATE KEY-----";

/// The DER bytes of a PKCS#8 PEM private key, however a secret store kept its lines (real
/// newlines, `\\n`, or one line with spaces). GitHub hands out PKCS#1 keys; WebCrypto
/// takes PKCS#8 only, so those get a clear error with the conversion command.
pub fn pkcs8_der(pem: &str) -> Result<Vec<u8>, ApiError> {
    let unavailable = |m: &str| ApiError::new(ErrorCode::Unavailable, m);
    if pem.contains("BEGIN RSA PRIVATE KEY") {
        return Err(unavailable(
            "GITHUB_APP_PRIVATE_KEY is PKCS#1; convert it: openssl pkcs8 -topk8 -nocrypt -in key.pem",
        ));
    }
    let body = pem
        .split_once(BEGIN)
        .and_then(|(_, rest)| rest.split_once(END))
        .map(|(body, _)| body.replace("\\n", "\n"))
        .ok_or_else(|| unavailable("GITHUB_APP_PRIVATE_KEY is not a PEM private key"))?;
    let body: String = body.chars().filter(|c| !c.is_whitespace()).collect();
    if body.is_empty() {
        return Err(unavailable(
            "GITHUB_APP_PRIVATE_KEY is not a PEM private key",
        ));
    }
    STANDARD.decode(body).map_err(|_| {
        unavailable("GITHUB_APP_PRIVATE_KEY is not valid base64 inside its PEM armour")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_read_however_its_lines_were_kept() {
        let der = b"not really a key, but bytes".to_vec();
        let b64 = STANDARD.encode(&der);
        let (a, b) = b64.split_at(16);
        for pem in [
            format!("{BEGIN}\n{a}\n{b}\n{END}\n"),
            format!("{BEGIN}\\n{a}\\n{b}\\n{END}"),
            format!("{BEGIN} {a} {b} {END}"),
            format!("  {BEGIN}\r\n{a}\r\n{b}\r\n{END}\r\n"),
        ] {
            assert_eq!(pkcs8_der(&pem).unwrap(), der, "{pem}");
        }
        assert!(pkcs8_der("-----BEGIN RSA PRIVATE KEY-----")
            .unwrap_err()
            .message
            .contains("PKCS#1"));
        assert!(pkcs8_der("hello").is_err());
    }
}
