//! A TCP proxy that cuts every connection through it at a fixed interval: a network that
//! keeps dropping, for reliability tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub struct FlakyProxy {
    pub url: String,
    cuts: Arc<Mutex<usize>>,
    tasks: Vec<JoinHandle<()>>,
}

impl FlakyProxy {
    /// Forwards to `127.0.0.1:target`, cutting all connections every `every`.
    pub async fn start(target: u16, every: Duration) -> anyhow::Result<FlakyProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let live: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let cuts = Arc::new(Mutex::new(0usize));
        let accept = {
            let live = live.clone();
            tokio::spawn(async move {
                while let Ok((mut inbound, _)) = listener.accept().await {
                    let conn = tokio::spawn(async move {
                        if let Ok(mut outbound) = TcpStream::connect(("127.0.0.1", target)).await {
                            let _ =
                                tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                        }
                    });
                    if let Ok(mut l) = live.lock() {
                        l.push(conn);
                    }
                }
            })
        };
        let cutter = {
            let cuts = cuts.clone();
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(every).await;
                    let conns: Vec<_> = live
                        .lock()
                        .map(|mut l| l.drain(..).collect())
                        .unwrap_or_default();
                    let n = conns.iter().filter(|c| !c.is_finished()).count();
                    for c in conns {
                        c.abort();
                    }
                    if let Ok(mut total) = cuts.lock() {
                        *total += n;
                    }
                }
            })
        };
        Ok(FlakyProxy {
            url,
            cuts,
            tasks: vec![accept, cutter],
        })
    }

    /// How many live connections were cut so far.
    pub fn cuts(&self) -> usize {
        self.cuts.lock().map(|c| *c).unwrap_or(0)
    }
}

impl Drop for FlakyProxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}
