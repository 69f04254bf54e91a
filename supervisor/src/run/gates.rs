//! A cloud vendor's sandbox keeps its ports behind gates of its own: the vendor exposes each
//! gate's port (never the app's), and a gate lets through only a link the control plane
//! signed for one of the session's people, or the cookie it swapped one for, with the key
//! derived for this sandbox. The same gate the local host runs in front of its sandboxes'
//! ports; here it listens on every interface, where the vendor's proxy reaches it.

use crate::host::gate::Gate;
use inspect_protocol::provider::GatePorts;
use std::sync::Arc;

pub struct Gates {
    key: Arc<Vec<u8>>,
    sandbox_id: String,
}

impl Gates {
    pub fn new(key: &str, sandbox_id: &str) -> Gates {
        Gates {
            key: Arc::new(key.as_bytes().to_vec()),
            sandbox_id: sandbox_id.to_owned(),
        }
    }

    /// The gates the sandbox starts with: one per tunnelled port, numbered in order, the
    /// editor's and the desktop's two.
    pub async fn open_all(&self, ports: &[u16]) {
        let gates = GatePorts::of(&self.sandbox_id);
        for (i, port) in ports.iter().enumerate() {
            if let Some(gate) = gates.app(i) {
                self.open(*port, gate).await;
            }
        }
        for (port, gate) in gates.services() {
            self.open(port, gate).await;
        }
    }

    /// A gate on `gate_port` in front of `port`, for the life of the sandbox. A port that
    /// cannot be listened on is logged: the vendor's URL for it then answers nothing.
    pub async fn open(&self, port: u16, gate_port: u16) {
        match tokio::net::TcpListener::bind(("0.0.0.0", gate_port)).await {
            Ok(listener) => {
                let gate = Gate {
                    key: Arc::clone(&self.key),
                    sandbox_id: self.sandbox_id.clone(),
                    port,
                    inbound: None,
                    public_port: gate_port,
                };
                tokio::spawn(gate.serve(listener));
                tracing::info!(port, gate_port, "gate open");
            }
            Err(e) => tracing::warn!(port, gate_port, "no gate: {e}"),
        }
    }
}
