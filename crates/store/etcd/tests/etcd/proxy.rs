//! A TCP proxy that can cut every connection and refuse new ones, to disconnect one client
//! from etcd while etcd keeps running.

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

pub struct Proxy {
    port: u16,
    cut: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: String) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let (cut, cut_rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *cut_rx.borrow() {
                    continue;
                }
                tokio::spawn(forward(client, target.clone(), cut_rx.clone()));
            }
        });
        Proxy { port, cut, task }
    }

    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
        self.cut.send_replace(true);
    }
}

async fn forward(mut client: TcpStream, target: String, mut cut: watch::Receiver<bool>) {
    let Ok(mut server) = TcpStream::connect(target).await else {
        return;
    };
    tokio::select! {
        _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
        _ = cut.wait_for(|cut| *cut) => {}
    }
}
