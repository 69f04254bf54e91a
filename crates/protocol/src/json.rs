//! JSON read from bytes or from a `Value`, through the text reader.
//!
//! Everything in the Worker parses JSON from text: `serde_json` generates its whole parser,
//! and every type's field visitor, once for each kind of input, so reading bytes (`from_slice`)
//! or a `Value` (`from_value`) through a reader of their own would put a second copy of them
//! in the wasm. Bytes are checked as UTF-8 (JSON is UTF-8) and read as text; a `Value` is
//! written out and read back.

use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};

/// `serde_json::from_slice`, through the text reader.
pub fn from_slice<T: DeserializeOwned>(bytes: &[u8]) -> serde_json::Result<T> {
    let text = std::str::from_utf8(bytes)
        .map_err(|e| serde_json::Error::custom(format!("the body is not UTF-8: {e}")))?;
    serde_json::from_str(text)
}

/// `serde_json::from_value`, through the text reader: the value is written out and read
/// back. `from_value` drives a second deserializer (for `Value`) with every visitor of the
/// types read that way inlined into it; the largest function in the wasm was one of them.
pub fn from_value<T: DeserializeOwned>(value: &serde_json::Value) -> serde_json::Result<T> {
    serde_json::from_str(&value.to_string())
}

/// For a field of a service's payload that may come as `null`:
/// `#[serde(default, deserialize_with = "inspect_protocol::json::null_as_default")]`.
/// serde's `default` covers a missing key only; services send `null` for an empty list, a
/// missing text or a flag not yet known (Linear's `previousComments`, GitHub's `merged`).
pub fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_reads_as_the_default() {
        #[derive(Deserialize)]
        struct P {
            #[serde(default, deserialize_with = "null_as_default")]
            list: Vec<u32>,
            #[serde(default, deserialize_with = "null_as_default")]
            text: String,
        }
        let p: P = from_slice(br#"{"list": null, "text": null}"#).unwrap();
        assert!(p.list.is_empty() && p.text.is_empty());
        let p: P = from_slice(br#"{}"#).unwrap();
        assert!(p.list.is_empty());
        let p: P = from_slice(br#"{"list": [3], "text": "x"}"#).unwrap();
        assert_eq!((p.list, p.text.as_str()), (vec![3], "x"));
    }

    #[test]
    fn reads_json_and_refuses_what_is_not_utf8() {
        let v: Vec<u32> = from_slice(b"[1, 2]").unwrap();
        assert_eq!(v, [1, 2]);
        assert!(from_slice::<Vec<u32>>(b"[1,").is_err());
        let e = from_slice::<String>(b"\"\xff\"").unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }

    #[test]
    fn reads_a_value_as_a_type() {
        let v: Vec<u32> = from_value(&serde_json::json!([1, 2])).unwrap();
        assert_eq!(v, [1, 2]);
        assert!(from_value::<Vec<u32>>(&serde_json::json!({"a": 1})).is_err());
    }
}
