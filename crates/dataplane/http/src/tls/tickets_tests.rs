//! What a client is handed to resume with: one TLS 1.3 session ticket per handshake.

use super::*;
use rustls::client::{ClientSessionMemoryCache, ClientSessionStore, Resumption};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, Connection, HandshakeKind, NamedGroup, ServerConnection};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A client's session store that counts the TLS 1.3 tickets it is given.
#[derive(Debug)]
struct Counting {
    store: ClientSessionMemoryCache,
    tickets: AtomicUsize,
}

impl ClientSessionStore for Counting {
    fn set_kx_hint(&self, name: ServerName<'static>, group: NamedGroup) {
        self.store.set_kx_hint(name, group);
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<NamedGroup> {
        self.store.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.store.set_tls12_session(name, value);
    }
    fn tls12_session(
        &self,
        name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.store.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.store.remove_tls12_session(name);
    }
    fn insert_tls13_ticket(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.tickets.fetch_add(1, Ordering::Relaxed);
        self.store.insert_tls13_ticket(name, value);
    }
    fn take_tls13_ticket(
        &self,
        name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.store.take_tls13_ticket(name)
    }
}

/// Moves what `from` has to send into `to`, which processes it; whether anything moved.
fn send(from: &mut Connection, to: &mut Connection) -> bool {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).unwrap();
    }
    let mut rest = wire.as_slice();
    while !rest.is_empty() {
        to.read_tls(&mut rest).unwrap();
        to.process_new_packets().unwrap();
    }
    !wire.is_empty()
}

/// One connection between `client` and `server`, in memory, until neither has anything more
/// to send (the tickets come after the handshake). How the client's handshake went.
fn connect(client: &Arc<rustls::ClientConfig>, server: &Arc<ServerConfig>) -> HandshakeKind {
    let name = ServerName::try_from("portico.invalid").unwrap();
    let mut client = Connection::from(ClientConnection::new(client.clone(), name).unwrap());
    let mut server = Connection::from(ServerConnection::new(server.clone()).unwrap());
    for _ in 0..10 {
        let sent = send(&mut client, &mut server);
        let answered = send(&mut server, &mut client);
        if !sent && !answered {
            break;
        }
    }
    assert!(!client.is_handshaking() && !server.is_handshaking());
    client.handshake_kind().unwrap()
}

#[test]
fn a_handshake_gives_the_client_one_session_ticket_and_each_resumption_one_more() {
    let server = server_config(Arc::new(Resolver::new()));
    let counting = Arc::new(Counting {
        store: ClientSessionMemoryCache::new(16),
        tickets: AtomicUsize::new(0),
    });
    let mut client = portico_testkit::accept_any_certificate();
    client.resumption = Resumption::store(counting.clone());
    let client = Arc::new(client);

    assert_eq!(connect(&client, &server), HandshakeKind::Full);
    assert_eq!(
        counting.tickets.load(Ordering::Relaxed),
        1,
        "after a full handshake"
    );
    for n in 2..=3 {
        assert_eq!(connect(&client, &server), HandshakeKind::Resumed);
        assert_eq!(
            counting.tickets.load(Ordering::Relaxed),
            n,
            "after a resumption"
        );
    }
}
