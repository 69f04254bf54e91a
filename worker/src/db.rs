//! Small helpers over the D1 binding: one error shape, one way to run a statement.

use inspect_protocol::ApiError;

pub use inspect_runtime::d1::{all, database, first, num, opt, run, sweep_then_run, unavailable};
pub use inspect_runtime::setting;

/// Random bytes from the runtime.
pub fn random<const N: usize>() -> Result<[u8; N], ApiError> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(bytes)
}
