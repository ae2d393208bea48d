//! Descriptors over a Unix stream socket (SCM_RIGHTS, rustix's safe ancillary-data API), with
//! the manifest's lines as the payload.

use super::manifest::{END, Entry, HaState, ha_line, line, parse};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// Descriptors per message: below the kernel's limit (SCM_MAX_FD, 253).
const PER_MESSAGE: usize = 200;

/// Sends `entries` with their descriptors, then `ha` and the end line.
pub fn send(
    stream: &UnixStream,
    entries: &[(Entry, OwnedFd)],
    ha: Option<&HaState>,
) -> io::Result<()> {
    for chunk in entries.chunks(PER_MESSAGE) {
        let text: String = chunk.iter().map(|(e, _)| line(e)).collect();
        let fds: Vec<_> = chunk.iter().map(|(_, fd)| fd.as_fd()).collect();
        let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(fds.len()))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
            return Err(io::Error::other(
                "the descriptors do not fit the control buffer",
            ));
        }
        let sent = rustix::net::sendmsg(
            stream,
            &[IoSlice::new(text.as_bytes())],
            &mut control,
            SendFlags::NOSIGNAL,
        )?;
        if sent != text.len() {
            return Err(io::Error::other("the manifest was sent in part"));
        }
    }
    use std::io::Write;
    let ha = ha.map(ha_line).unwrap_or_default();
    (&*stream).write_all(format!("{ha}{END}\n").as_bytes())
}

/// What [`receive`] got: each entry with its descriptor, and the agent's state.
pub type Received = (Vec<(Entry, OwnedFd)>, Option<HaState>);

/// Receives what [`send`] sent.
pub fn receive(stream: &UnixStream) -> io::Result<Received> {
    let (mut text, mut fds) = (Vec::new(), Vec::new());
    let mut buf = vec![0u8; 64 * 1024];
    let mut space = vec![MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(PER_MESSAGE))];
    while !text.ends_with(format!("{END}\n").as_bytes()) {
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = rustix::net::recvmsg(
            stream,
            &mut [IoSliceMut::new(&mut buf)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        if got.bytes == 0 {
            return Err(io::Error::other(
                "the predecessor closed the socket mid-list",
            ));
        }
        text.extend_from_slice(&buf[..got.bytes]);
        for message in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = message {
                fds.extend(received);
            }
        }
    }
    let list = parse(&String::from_utf8_lossy(&text)).map_err(io::Error::other)?;
    if list.entries.len() != fds.len() {
        let why = format!("{} entries, {} descriptors", list.entries.len(), fds.len());
        return Err(io::Error::other(why));
    }
    Ok((list.entries.into_iter().zip(fds).collect(), list.ha))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use portico_provider::SocketKind;

    /// A listener sent over the socket is the same socket: a connection to it is accepted
    /// from the received descriptor.
    #[test]
    fn a_listening_socket_arrives_as_the_same_socket() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let lock = tempfile::tempfile().unwrap();
        let (a, b) = UnixStream::pair().unwrap();
        let key = (SocketKind::Http, addr);
        let sent = vec![
            (Entry::Lock, OwnedFd::from(lock)),
            (Entry::Socket(key), OwnedFd::from(listener)),
        ];
        send(&a, &sent, None).unwrap();
        drop(sent);
        let (got, ha) = receive(&b).unwrap();
        assert_eq!(ha, None);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].0, Entry::Socket(key));
        let received = std::net::TcpListener::from(got.into_iter().nth(1).unwrap().1);
        let _client = std::net::TcpStream::connect(addr).unwrap();
        received.accept().unwrap();
    }

    #[test]
    fn more_descriptors_than_one_message_carries_arrive_in_order() {
        let sockets: Vec<_> = (0..PER_MESSAGE + 3)
            .map(|_| std::net::UdpSocket::bind("127.0.0.1:0").unwrap())
            .collect();
        let sent: Vec<_> = sockets
            .iter()
            .map(|s| {
                let key = (SocketKind::Udp, s.local_addr().unwrap());
                (Entry::Socket(key), s.try_clone().unwrap().into())
            })
            .collect();
        let (a, b) = UnixStream::pair().unwrap();
        let ha = HaState {
            lease: 1,
            held: Default::default(),
            quiets: false,
        };
        let sent_ha = ha.clone();
        let sender = std::thread::spawn(move || send(&a, &sent, Some(&sent_ha)).unwrap());
        let (got, received_ha) = receive(&b).unwrap();
        assert_eq!(received_ha, Some(ha));
        sender.join().unwrap();
        for ((entry, fd), s) in got.into_iter().zip(&sockets) {
            let received = std::net::UdpSocket::from(fd);
            assert_eq!(received.local_addr().unwrap(), s.local_addr().unwrap());
            assert_eq!(
                entry,
                Entry::Socket((SocketKind::Udp, s.local_addr().unwrap()))
            );
        }
    }
}
