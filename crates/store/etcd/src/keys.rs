//! The key layout under the configured prefix (default `/portico/`):
//!
//! | key | what |
//! | --- | --- |
//! | `election/<lease id, hex>` | one per controller campaigning; the oldest (lowest create revision) leads |
//! | `desired/…` | the desired state, one key per load balancer and per certificate |
//! | `desired-pending` | present while a commit too big for one txn is being written (its generation) |
//! | `desired-commit` | the commit marker: the generation of the last whole commit; readers publish at its writes |
//! | `agents/<node>` | each agent's registration and feedback, under the agent's lease |
//! | `placement/<lb uuid>` | where a load balancer runs (active, standby, epoch); written by the leader in its commits, mirrored by agents |
//! | `ha/<lb-uuid>` | who is active for a load balancer (`{holder, epoch}`), changed only by compare-and-swap ([`crate::Swap`]) |

/// The desired subtree, relative to the prefix.
pub const DESIRED: &str = "desired/";
/// The commit marker, relative to the prefix.
pub const COMMIT: &str = "desired-commit";
/// The in-progress mark of a commit written in several txns, relative to the prefix.
pub const PENDING: &str = "desired-pending";
/// The placements' subtree, relative to the prefix.
pub const PLACEMENT: &str = "placement/";
/// The agents' subtree, relative to the prefix.
pub const AGENTS: &str = "agents/";
/// The election's subtree, relative to the prefix.
pub const ELECTION: &str = "election/";

/// Absolute keys under one prefix.
#[derive(Debug, Clone)]
pub struct Layout {
    prefix: String,
}

impl Layout {
    pub fn new(prefix: &str) -> Self {
        Layout {
            prefix: prefix.to_owned(),
        }
    }

    /// The absolute key of a key relative to the prefix.
    pub fn abs(&self, relative: &str) -> Vec<u8> {
        format!("{}{relative}", self.prefix).into_bytes()
    }

    /// The key relative to the prefix, if `absolute` is under it and UTF-8.
    pub fn relative<'a>(&self, absolute: &'a [u8]) -> Option<&'a str> {
        let rest = absolute.strip_prefix(self.prefix.as_bytes())?;
        std::str::from_utf8(rest).ok()
    }

    /// The election key of one candidate's lease.
    pub fn candidate(&self, lease: i64) -> Vec<u8> {
        self.abs(&format!("{ELECTION}{lease:016x}"))
    }
}

/// The end of the range of every key that starts with `prefix` (etcd's "range_end").
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    // Every byte was 0xff: the range runs to the end of the keyspace.
    vec![0]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_increments_the_last_byte_that_can_be() {
        assert_eq!(prefix_end(b"/p/desired/"), b"/p/desired0".to_vec());
        assert_eq!(prefix_end(b"a\xff"), b"b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
    }

    #[test]
    fn relative_strips_the_prefix_only() {
        let layout = Layout::new("/portico/");
        assert_eq!(layout.relative(b"/portico/desired/x"), Some("desired/x"));
        assert_eq!(layout.relative(b"/other/desired/x"), None);
        assert_eq!(layout.abs(COMMIT), b"/portico/desired-commit".to_vec());
    }
}
