//! Member selection and health of one pool, over the pure cores of `portico-balance`.
//!
//! The selection API, for the request path (and its retry loop):
//!
//! - [`PoolState::choose`](super::PoolState::choose)`(request, exclude)` gives a [`Pick`]: the
//!   member for this try, never one in `exclude` (the members this request already tried),
//!   never one out of rotation (ejected by passive health, failing its active checks). `None`
//!   when no member may take it (503).
//! - [`PoolState::record`](super::PoolState::record)`(pick, outcome)` reports how the try went:
//!   it feeds passive health and the latency EWMA. A `Pick` counts as a request in flight on
//!   its member until it is recorded or dropped (dropping it records nothing).
//! - [`Pick::set_cookie`] is the `Set-Cookie` value to add to the response (cookie affinity,
//!   when the request's cookie did not name a member in rotation).
//!
//! State (health, EWMA, in-flight counts, the round-robin position) lives in a [`Balance`]
//! shared by every configuration that keeps the pool id; each member's state is kept while
//! the member (its address) stays.

use crate::upstream::Endpoint;
use arc_swap::ArcSwap;
use http::header::{COOKIE, HeaderValue};
use http::{HeaderMap, Uri};
use portico_balance::active::Active;
use portico_balance::hash::{hash64, mix};
use portico_balance::least::{self, Ewma};
use portico_balance::maglev::Maglev;
use portico_balance::passive::{Passive, PassiveConfig};
use portico_balance::wrr::SmoothWrr;
use portico_model::{Algorithm, HashKey, MemberId, PassiveHealth, PoolSettings};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// What member selection looks at in a request.
#[derive(Debug, Clone, Copy)]
pub struct RequestInfo<'a> {
    pub headers: &'a HeaderMap,
    pub uri: &'a Uri,
    /// The TCP peer's address.
    pub client: IpAddr,
}

/// How one try on a member went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A response head below 500 after `latency`.
    Success { latency: Duration },
    /// A 5xx response head after `latency` (a failure for passive health).
    Status5xx { latency: Duration },
    /// The connection was refused or timed out.
    ConnectFailed,
    /// The connection broke before the response head.
    Reset,
    /// No response head in time.
    Timeout { latency: Duration },
}

impl Outcome {
    fn latency(self) -> Option<Duration> {
        match self {
            Outcome::Success { latency }
            | Outcome::Status5xx { latency }
            | Outcome::Timeout { latency } => Some(latency),
            Outcome::ConnectFailed | Outcome::Reset => None,
        }
    }

    fn is_failure(self) -> bool {
        !matches!(self, Outcome::Success { .. })
    }
}

/// The member chosen for one try; a request in flight on it until recorded or dropped.
#[derive(Debug)]
pub struct Pick {
    member: Arc<MemberState>,
    set_cookie: Option<HeaderValue>,
}

impl Pick {
    pub(crate) fn endpoint(&self) -> &Arc<Endpoint> {
        &self.member.endpoint
    }

    pub fn addr(&self) -> SocketAddr {
        self.member.endpoint.addr()
    }

    /// The `Set-Cookie` value the response carries (cookie affinity, new choice).
    pub fn set_cookie(&self) -> Option<&HeaderValue> {
        self.set_cookie.as_ref()
    }
}

impl Drop for Pick {
    fn drop(&mut self) {
        self.member.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How a member stands, as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    Healthy,
    /// Ejected by passive health for this much longer.
    Ejected {
        remaining: Duration,
    },
    /// Out of rotation: its active checks fail.
    FailingChecks,
}

/// One member's state, kept across configurations while the member stays.
#[derive(Debug)]
pub(crate) struct MemberState {
    pub(crate) endpoint: Arc<Endpoint>,
    /// Stable key: the hash of the member id (Maglev, the affinity cookie).
    key: u64,
    /// The affinity cookie's value: the key in hex (it does not reveal the address).
    cookie: String,
    passive: Mutex<Passive>,
    pub(crate) active: Mutex<Active>,
    ewma: Mutex<Ewma>,
    in_flight: AtomicU32,
    healthy_gauge: Gauge,
    ejections: Counter,
}

/// The members of one generation, with what selection precomputes from them.
#[derive(Debug, Default)]
struct Members {
    list: Vec<Arc<MemberState>>,
    weights: Vec<u32>,
    maglev: Option<Maglev>,
    /// Every member speaks plain HTTP/1.1 (no TLS, no HTTP/2).
    plain: bool,
}

/// Where member series go: the families and the pool's name.
#[derive(Debug, Clone)]
pub(crate) struct MemberMetrics {
    pub(crate) pool: String,
    pub(crate) healthy: crate::metrics::Family<MemberLabels, Gauge>,
    pub(crate) ejections: crate::metrics::Family<MemberLabels, Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub(crate) struct MemberLabels {
    pub(crate) pool: String,
    pub(crate) member: String,
}

impl MemberMetrics {
    fn labels(&self, addr: SocketAddr) -> MemberLabels {
        MemberLabels {
            pool: self.pool.clone(),
            member: addr.to_string(),
        }
    }
}

/// Selection and health state of one pool id, shared by the configurations that keep it.
#[derive(Debug)]
pub(crate) struct Balance {
    algorithm: Algorithm,
    /// Shared with the pool's state (see [`super::PoolState`]).
    pub(crate) settings: Arc<PoolSettings>,
    /// `Host` of active checks: the Service's cluster name.
    pub(crate) check_host: String,
    members: ArcSwap<Members>,
    /// The round-robin position; its lock also orders member swaps.
    wrr: Mutex<SmoothWrr>,
    epoch: Instant,
    random: AtomicU64,
    /// Whether the active check task runs.
    pub(crate) checking: AtomicBool,
    metrics: Option<MemberMetrics>,
}

/// One ready member as the model gives it.
pub(crate) struct MemberSpec {
    pub(crate) id: MemberId,
    pub(crate) weight: u32,
    pub(crate) endpoint: Arc<Endpoint>,
}

impl Balance {
    pub(crate) fn new(
        algorithm: Algorithm,
        settings: Arc<PoolSettings>,
        check_host: String,
        metrics: Option<MemberMetrics>,
    ) -> Self {
        Balance {
            algorithm,
            settings,
            check_host,
            members: ArcSwap::default(),
            wrr: Mutex::new(SmoothWrr::default()),
            epoch: Instant::now(),
            random: AtomicU64::new(u64::from(std::process::id())),
            checking: AtomicBool::new(false),
            metrics,
        }
    }

    /// Time on the pool's clock.
    pub(crate) fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    fn passive_config(&self) -> PassiveConfig {
        let p: &PassiveHealth = &self.settings.passive;
        PassiveConfig {
            failures: p.failures,
            ejection: p.ejection(),
            max_ejection: PassiveHealth::MAX_EJECTION,
        }
    }

    /// Replaces the members, keeping the state of those that stay (by address).
    pub(crate) fn set_members(&self, specs: Vec<MemberSpec>) {
        let mut wrr = self.wrr.lock().unwrap_or_else(PoisonError::into_inner);
        let old = self.members.load_full();
        let by_addr: HashMap<SocketAddr, usize> = (old.list.iter().enumerate())
            .map(|(i, m)| (m.endpoint.addr(), i))
            .collect();
        let mut previous = Vec::with_capacity(specs.len());
        let mut list = Vec::with_capacity(specs.len());
        let mut weights = Vec::with_capacity(specs.len());
        for spec in specs {
            let kept = by_addr.get(&spec.endpoint.addr()).copied();
            previous.push(kept);
            let member = match kept {
                Some(i) if Arc::ptr_eq(&old.list[i].endpoint, &spec.endpoint) => {
                    old.list[i].clone()
                }
                _ => Arc::new(self.member(spec.id, spec.endpoint)),
            };
            list.push(member);
            weights.push(spec.weight);
        }
        if let Some(metrics) = &self.metrics {
            let stays: Vec<SocketAddr> = list.iter().map(|m| m.endpoint.addr()).collect();
            for gone in old
                .list
                .iter()
                .filter(|m| !stays.contains(&m.endpoint.addr()))
            {
                let labels = metrics.labels(gone.endpoint.addr());
                metrics.healthy.remove(&labels);
                metrics.ejections.remove(&labels);
            }
        }
        let maglev = matches!(self.algorithm, Algorithm::Hash(_)).then(|| {
            let keys: Vec<u64> = list.iter().map(|m| m.key).collect();
            Maglev::new(&keys, &weights)
        });
        *wrr = wrr.remap(&previous);
        let plain = list.iter().all(|m| m.endpoint.is_plain());
        self.members.store(Arc::new(Members {
            list,
            weights,
            maglev,
            plain,
        }));
    }

    fn member(&self, id: MemberId, endpoint: Arc<Endpoint>) -> MemberState {
        let key = hash64(0, id.0.as_bytes());
        let (healthy_gauge, ejections) = match &self.metrics {
            Some(m) => {
                let labels = m.labels(endpoint.addr());
                let gauge = m.healthy.get_or_create(&labels).clone();
                (gauge, m.ejections.get_or_create(&labels).clone())
            }
            None => (Gauge::default(), Counter::default()),
        };
        healthy_gauge.set(1);
        MemberState {
            endpoint,
            key,
            cookie: format!("{key:016x}"),
            passive: Mutex::new(Passive::default()),
            active: Mutex::new(Active::default()),
            ewma: Mutex::new(Ewma::default()),
            in_flight: AtomicU32::new(0),
            healthy_gauge,
            ejections,
        }
    }

    /// Whether the proxy's own HTTP/1.1 path can forward to this pool: its members speak plain
    /// HTTP/1.1, and choosing one reads nothing of the request (no affinity cookie, no hash
    /// of a header, cookie or the URI; the client address comes apart).
    pub(crate) fn own_path_fits(&self) -> bool {
        let by_request = self.settings.affinity.is_some()
            || matches!(&self.algorithm, Algorithm::Hash(key) if *key != HashKey::ClientAddress);
        !by_request && self.members.load().plain
    }

    /// How many members the pool has, in rotation or not.
    pub(crate) fn member_count(&self) -> usize {
        self.members.load().list.len()
    }

    /// The members, in model order.
    pub(crate) fn endpoints(&self) -> Vec<Arc<Endpoint>> {
        let members = self.members.load();
        members.list.iter().map(|m| m.endpoint.clone()).collect()
    }

    /// Every member's address and health.
    pub(crate) fn health(&self) -> Vec<(SocketAddr, Health)> {
        let now = self.now();
        let members = self.members.load();
        let health = members
            .list
            .iter()
            .map(|m| (m.endpoint.addr(), m.health(now)));
        health.collect()
    }

    pub(crate) fn member_states(&self) -> Vec<Arc<MemberState>> {
        self.members.load().list.clone()
    }

    /// See the module's documentation.
    pub(crate) fn choose(&self, request: &RequestInfo<'_>, exclude: &[SocketAddr]) -> Option<Pick> {
        let now = self.now();
        let members = self.members.load();
        let list = &members.list;
        let eligible = |i: usize| {
            let m = &list[i];
            !exclude.contains(&m.endpoint.addr()) && m.in_rotation(now)
        };
        let affinity = self.settings.affinity.as_ref();
        let value = affinity.and_then(|a| cookie(request.headers, &a.name));
        if let Some(value) = value {
            let named = list.iter().position(|m| m.cookie.as_bytes() == value);
            if let Some(i) = named.filter(|&i| eligible(i)) {
                return Some(self.pick(list[i].clone(), None));
            }
        }
        let chosen = match &self.algorithm {
            Algorithm::RoundRobin => self.round_robin(&members, &eligible),
            Algorithm::LeastRequest => {
                let random = mix(self
                    .random
                    .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed));
                let unmeasured = (list.iter())
                    .filter_map(|m| lock(&m.ewma).value())
                    .fold(f64::INFINITY, f64::min);
                let unmeasured = if unmeasured.is_finite() {
                    unmeasured
                } else {
                    1.0
                };
                let cost = |i: usize| {
                    let m = &list[i];
                    let ewma = lock(&m.ewma).value();
                    least::cost(ewma, m.in_flight.load(Ordering::Relaxed), unmeasured)
                };
                least::pick(list.len(), eligible, cost, random)
            }
            Algorithm::Hash(key) => match hash_key(key, request) {
                Some(h) => members.maglev.as_ref().and_then(|t| t.pick(h, eligible)),
                None => self.round_robin(&members, &eligible),
            },
        }?;
        let set_cookie = self.settings.affinity.as_ref().and_then(|a| {
            let mut v = format!(
                "{}={}; Path={}",
                a.name,
                list[chosen].cookie,
                a.path.as_deref().unwrap_or("/")
            );
            if let Some(age) = a.max_age_s {
                v.push_str(&format!("; Max-Age={age}"));
            }
            v.push_str("; HttpOnly");
            HeaderValue::from_str(&v).ok()
        });
        Some(self.pick(list[chosen].clone(), set_cookie))
    }

    fn round_robin(&self, members: &Members, eligible: &dyn Fn(usize) -> bool) -> Option<usize> {
        let mut wrr = self.wrr.lock().unwrap_or_else(PoisonError::into_inner);
        // A swap in between (rare) leaves the position with the other list's length; the pick
        // then resizes it.
        wrr.pick(&members.weights, eligible)
    }

    fn pick(&self, member: Arc<MemberState>, set_cookie: Option<HeaderValue>) -> Pick {
        member.in_flight.fetch_add(1, Ordering::Relaxed);
        Pick { member, set_cookie }
    }

    /// See the module's documentation.
    pub(crate) fn record(&self, pick: Pick, outcome: Outcome) {
        let now = self.now();
        let member = &pick.member;
        if let Some(latency) = outcome.latency() {
            lock(&member.ewma).observe(latency, now);
        }
        if !outcome.is_failure() {
            lock(&member.passive).success(now);
            return;
        }
        let config = self.passive_config();
        let members = self.members.load();
        let others_in_rotation =
            (members.list.iter()).any(|m| !Arc::ptr_eq(m, member) && m.in_rotation(now));
        let ejected = lock(&member.passive).failure(now, &config, others_in_rotation);
        if let Some(until) = ejected {
            let addr = member.endpoint.addr();
            tracing::warn!(
                upstream = %addr,
                seconds = (until - now).as_secs_f64(),
                ?outcome,
                "member ejected after failures in a row"
            );
            member.ejections.inc();
            member.refresh_gauge(now);
            // Back in rotation when the time is up: the gauge follows.
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                let weak = Arc::downgrade(member);
                let epoch = self.epoch;
                runtime.spawn(async move {
                    tokio::time::sleep_until((epoch + until).into()).await;
                    if let Some(m) = weak.upgrade() {
                        m.refresh_gauge(epoch.elapsed());
                    }
                });
            }
        }
    }
}

impl MemberState {
    fn in_rotation(&self, now: Duration) -> bool {
        !lock(&self.passive).is_ejected(now) && lock(&self.active).is_healthy()
    }

    pub(crate) fn health(&self, now: Duration) -> Health {
        if let Some(until) = lock(&self.passive).ejected_until(now) {
            return Health::Ejected {
                remaining: until - now,
            };
        }
        if lock(&self.active).is_healthy() {
            Health::Healthy
        } else {
            Health::FailingChecks
        }
    }

    pub(crate) fn refresh_gauge(&self, now: Duration) {
        self.healthy_gauge.set(i64::from(self.in_rotation(now)));
    }
}

impl Drop for Balance {
    fn drop(&mut self) {
        if let Some(metrics) = &self.metrics {
            for m in &self.members.load().list {
                let labels = metrics.labels(m.endpoint.addr());
                metrics.healthy.remove(&labels);
                metrics.ejections.remove(&labels);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The hash of the request's key, or `None` when the request has none.
fn hash_key(key: &HashKey, request: &RequestInfo<'_>) -> Option<u64> {
    match key {
        HashKey::Header(name) => {
            let value = request.headers.get(name.as_str())?;
            Some(hash64(0, value.as_bytes()))
        }
        HashKey::Cookie(name) => cookie(request.headers, name).map(|v| hash64(0, v)),
        HashKey::ClientAddress => Some(hash64(
            0,
            request.client.to_canonical().to_string().as_bytes(),
        )),
        HashKey::RequestUri => {
            let target = request.uri.path_and_query().map_or("/", |p| p.as_str());
            Some(hash64(0, target.as_bytes()))
        }
    }
}

/// The value of the first cookie named `name` in the request's `Cookie` fields.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a [u8]> {
    let fields = headers.get_all(COOKIE).into_iter();
    let pairs = fields.flat_map(|f| f.as_bytes().split(|b| *b == b';'));
    pairs
        .filter_map(|pair| {
            let pair = pair.trim_ascii();
            let eq = pair.iter().position(|b| *b == b'=')?;
            let (n, v) = (&pair[..eq], &pair[eq + 1..]);
            (n.trim_ascii() == name.as_bytes()).then(|| v.trim_ascii())
        })
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;
    use portico_model::{CookieAffinity, PoolProtocol};

    fn balance(algorithm: Algorithm, settings: PoolSettings, n: u16) -> Balance {
        let b = Balance::new(
            algorithm,
            Arc::new(settings),
            "web.default.svc".into(),
            None,
        );
        let specs = (0..n)
            .map(|i| MemberSpec {
                id: MemberId::derive(&format!("m{i}")),
                weight: 1,
                endpoint: Arc::new(Endpoint::new(
                    SocketAddr::from(([10, 0, 0, 1], 8000 + i)),
                    PoolProtocol::Http,
                    None,
                    None,
                )),
            })
            .collect();
        b.set_members(specs);
        b
    }

    fn request(headers: &HeaderMap) -> RequestInfo<'_> {
        static URI: std::sync::LazyLock<Uri> = std::sync::LazyLock::new(|| Uri::from_static("/"));
        RequestInfo {
            headers,
            uri: &URI,
            client: IpAddr::from([127, 0, 0, 1]),
        }
    }

    #[test]
    fn cookies_are_parsed() {
        let mut h = HeaderMap::new();
        h.append(COOKIE, HeaderValue::from_static("a=1; sess = x2 ;b=3"));
        h.append(COOKIE, HeaderValue::from_static("c=4"));
        assert_eq!(cookie(&h, "sess"), Some(&b"x2"[..]));
        assert_eq!(cookie(&h, "c"), Some(&b"4"[..]));
        assert_eq!(cookie(&h, "d"), None);
    }

    #[test]
    fn passive_ejection_spares_the_last_member() {
        let b = balance(Algorithm::RoundRobin, PoolSettings::default(), 2);
        let h = HeaderMap::new();
        let fail = |b: &Balance, addr: SocketAddr| {
            for _ in 0..5 {
                let pick = loop {
                    let p = b.choose(&request(&h), &[]).unwrap();
                    if p.addr() == addr {
                        break p;
                    }
                };
                b.record(pick, Outcome::ConnectFailed);
            }
        };
        let [a, c] = [0, 1].map(|i| b.member_states()[i].endpoint.addr());
        fail(&b, a);
        assert!(matches!(b.health()[0].1, Health::Ejected { .. }));
        // Only `c` is in rotation: its failures do not eject it.
        for _ in 0..10 {
            let p = b.choose(&request(&h), &[]).unwrap();
            assert_eq!(p.addr(), c);
            b.record(
                p,
                Outcome::Status5xx {
                    latency: Duration::ZERO,
                },
            );
        }
        assert_eq!(b.health()[1].1, Health::Healthy);
        assert!(
            b.choose(&request(&h), &[c]).is_none(),
            "the excluded one and an ejected one"
        );
    }

    #[test]
    fn affinity_cookie_keeps_the_member_and_is_rechosen_when_gone() {
        let settings = PoolSettings {
            affinity: Some(CookieAffinity {
                name: "route".into(),
                max_age_s: Some(60),
                path: None,
            }),
            ..PoolSettings::default()
        };
        let b = balance(Algorithm::RoundRobin, settings, 3);
        let first = b.choose(&request(&HeaderMap::new()), &[]).unwrap();
        let set = first.set_cookie().unwrap().to_str().unwrap().to_owned();
        assert!(set.ends_with("; Path=/; Max-Age=60; HttpOnly"), "{set}");
        let pair = set.split(';').next().unwrap().to_owned();
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_str(&pair).unwrap());
        for _ in 0..5 {
            let p = b.choose(&request(&h), &[]).unwrap();
            assert_eq!(p.addr(), first.addr());
            assert!(p.set_cookie().is_none());
        }
        let mut h = HeaderMap::new();
        h.insert(COOKIE, HeaderValue::from_static("route=0000000000000000"));
        assert!(b.choose(&request(&h), &[]).unwrap().set_cookie().is_some());
    }

    #[test]
    fn hash_keeps_a_key_on_a_member_and_falls_back_without_key() {
        let b = balance(
            Algorithm::Hash(HashKey::Header("x-user".into())),
            PoolSettings::default(),
            3,
        );
        let mut seen = std::collections::HashSet::new();
        for user in 0..30 {
            let mut h = HeaderMap::new();
            h.insert(
                "x-user",
                HeaderValue::from_str(&format!("u{user}")).unwrap(),
            );
            let first = b.choose(&request(&h), &[]).unwrap().addr();
            for _ in 0..3 {
                assert_eq!(b.choose(&request(&h), &[]).unwrap().addr(), first);
            }
            seen.insert(first);
        }
        assert_eq!(seen.len(), 3);
        let none = HeaderMap::new();
        let rr: Vec<_> = (0..3)
            .map(|_| b.choose(&request(&none), &[]).unwrap().addr())
            .collect();
        assert_eq!(rr.iter().collect::<std::collections::HashSet<_>>().len(), 3);
    }

    #[test]
    fn least_request_avoids_the_slow_member() {
        let b = balance(Algorithm::LeastRequest, PoolSettings::default(), 3);
        let h = HeaderMap::new();
        let slow = b.member_states()[2].endpoint.addr();
        let mut slow_count = 0;
        for _ in 0..300 {
            let p = b.choose(&request(&h), &[]).unwrap();
            let latency = if p.addr() == slow { 50 } else { 1 };
            slow_count += usize::from(p.addr() == slow);
            b.record(
                p,
                Outcome::Success {
                    latency: Duration::from_millis(latency),
                },
            );
        }
        assert!(slow_count < 30, "{slow_count}");
    }

    #[test]
    fn member_state_survives_a_member_change() {
        let b = balance(Algorithm::RoundRobin, PoolSettings::default(), 3);
        let kept = b.member_states()[1].clone();
        let endpoints = b.endpoints();
        let specs = [1, 2].map(|i| MemberSpec {
            id: MemberId::derive(&format!("m{i}")),
            weight: 1,
            endpoint: endpoints[i].clone(),
        });
        b.set_members(specs.into());
        assert!(Arc::ptr_eq(&b.member_states()[0], &kept));
    }
}
