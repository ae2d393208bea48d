//! What the hand-over socket carries, as text: the predecessor's list of the descriptors it
//! sends (one line each, in their order), an agent's active-standby state (one `ha` line,
//! without a descriptor), and the successor's answer.

use portico_model::LoadBalancerId;
use portico_provider::{SocketKey, SocketKind};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One handed-over descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// The state directory's lock file (holding the lock).
    Lock,
    /// A listening socket.
    Socket(SocketKey),
}

/// The line that ends the list.
pub const END: &str = "end";

/// An agent's active-standby state, for its successor: the etcd lease its claims carry (the
/// successor keeps it alive) and the claims it holds, so that the successor starts their
/// elections as the holder instead of contending again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HaState {
    pub lease: i64,
    /// Each held claim's epoch and mod revision, by load balancer.
    pub held: BTreeMap<LoadBalancerId, (u64, i64)>,
    /// The predecessor stops its elections once the successor is ready and then says
    /// [`QUIET`]: the successor starts its own only then (absent: a predecessor that stops at
    /// its drain, whose successor starts them before it answers).
    #[serde(default)]
    pub quiets: bool,
}

/// The predecessor's line after a successor's `ready`: its elections neither read the pair's
/// adverts nor renew the claims any more.
pub const QUIET: &str = "quiet";
/// What a successor that was told [`QUIET`] says once its elections run (their first adverts
/// sent): the predecessor, which advertised its claims meanwhile, stops.
pub const ELECTING: &str = "electing";

/// The `ha` line of `state`.
pub fn ha_line(state: &HaState) -> String {
    format!("ha {}\n", serde_json::to_string(state).unwrap_or_default())
}

/// A whole list: the descriptors' entries and the agent's state, if sent.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct List {
    pub entries: Vec<Entry>,
    pub ha: Option<HaState>,
}

/// The list's line for `entry`.
pub fn line(entry: &Entry) -> String {
    match entry {
        Entry::Lock => "lock\n".to_owned(),
        Entry::Socket((kind, addr)) => format!("{kind} {addr}\n"),
    }
}

/// A whole list (ending with [`END`]).
pub fn parse(text: &str) -> Result<List, String> {
    let mut list = List::default();
    let entries = &mut list.entries;
    for line in text.lines() {
        match line.split_once(' ') {
            None if line == END => return Ok(list),
            None if line == "lock" => entries.push(Entry::Lock),
            Some(("ha", json)) => {
                let state = serde_json::from_str(json).map_err(|e| format!("{line:?}: {e}"))?;
                list.ha = Some(state);
            }
            Some((kind, addr)) => {
                let kind: SocketKind = kind.parse()?;
                let addr = addr.parse().map_err(|e| format!("{line:?}: {e}"))?;
                entries.push(Entry::Socket((kind, addr)));
            }
            None => return Err(format!("unexpected line {line:?}")),
        }
    }
    Err("the list ends without its end line".to_owned())
}

/// The successor's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// It serves its first state; its PID.
    Ready(u32),
    /// It could not start: why.
    Failed(String),
}

impl Answer {
    pub fn line(&self) -> String {
        match self {
            Answer::Ready(pid) => format!("ready {pid}\n"),
            Answer::Failed(why) => format!("failed {}\n", why.replace('\n', " ")),
        }
    }

    pub fn parse(line: &str) -> Option<Answer> {
        let (word, rest) = line.trim_end().split_once(' ')?;
        match word {
            "ready" => rest.parse().ok().map(Answer::Ready),
            "failed" => Some(Answer::Failed(rest.to_owned())),
            _ => None,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_list_reads_back_what_was_written() {
        let entries = vec![
            Entry::Lock,
            Entry::Socket((SocketKind::Http, "127.0.0.1:0".parse().unwrap())),
            Entry::Socket((SocketKind::Udp, "[::1]:53".parse().unwrap())),
        ];
        let mut text: String = entries.iter().map(line).collect();
        let ha = HaState {
            lease: 7587,
            held: BTreeMap::from([(LoadBalancerId::derive("lb"), (3, 42))]),
            quiets: true,
        };
        text.push_str(&ha_line(&ha));
        assert!(parse(&text).is_err(), "no end line yet");
        text.push_str(END);
        text.push('\n');
        let list = parse(&text).unwrap();
        assert_eq!(list.entries, entries);
        assert_eq!(list.ha, Some(ha));
        // An older predecessor's state has no `quiets`: its successor uses the older order.
        let older = parse("ha {\"lease\":5,\"held\":{}}\nend\n").unwrap();
        assert_eq!(older.ha.map(|h| (h.lease, h.quiets)), Some((5, false)));
        assert!(parse("ha {\nend\n").is_err());
        assert!(parse("ftp 1.2.3.4:21\nend\n").is_err());
        assert!(parse("tcp nowhere\nend\n").is_err());
    }

    #[test]
    fn answers_read_back_and_a_reason_stays_on_one_line() {
        for answer in [Answer::Ready(42), Answer::Failed("bad\nflag".to_owned())] {
            let line = answer.line();
            assert_eq!(line.lines().count(), 1);
            let back = Answer::parse(&line).unwrap();
            assert_eq!(back.line(), line);
        }
        assert_eq!(Answer::parse("hello"), None);
    }
}
