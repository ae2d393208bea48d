//! The routes of one protocol's listeners as one table per host, each kept from the previous
//! compile while the policies it holds are the same pointers in the same relative order.
//!
//! A policy's host rule puts it in one group: an exact host, a one-label wildcard, a suffix
//! wildcard, or no host at all. The table of an exact host holds its own group and every group
//! that host can match through (its wildcard, its suffix wildcards, the host-less group), so
//! that a lookup consults exactly one table; wildcard and suffix tables likewise. A table's
//! ranks are the positions of its policies among its own groups' in the listeners' merged
//! order: a lookup only ever compares ranks within one table, so a change to one host's
//! policies renumbers that host's table alone.
//!
//! Compiling over the previous routes: each policy is looked up by pointer among the previous
//! ones. A policy not found is new and its group changes; a group also changes when it lost a
//! policy (its count differs), when one of its policies names a pool whose state is not the
//! previous table's, and when one of its policies comes after a policy that preceded it before
//! (of every pair whose order flipped, the later one in the new order is caught: a table that
//! holds both holds its group). Only the tables that hold a changed group are compiled again.

use super::RequestHeaders;
use super::compile::Compiler;
use super::condition::{Check, Guard, holds};
use super::fxhash::FxMap;
use super::host::{normalize_host, suffixes, wildcard_suffix};
use super::options::path_regex;
use super::path::{PathMatch, PathTable};
use super::pool::Target;
use super::reduce::{HostMatch, reduce};
use super::split::Action;
use crate::ratelimit::Limiter;
use portico_model::{L7Policy, Listener, PoolId, RateLimit};
use regex::Regex;
use std::collections::HashSet;
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// A set of pool ids hashed like the route maps.
pub(crate) type PoolSet = HashSet<PoolId, BuildHasherDefault<super::fxhash::FxHasher>>;

/// The group of the host-less policies.
const ANY: u32 = 0;
/// The group of the policies whose rules can never all match: in no table.
const NEVER: u32 = u32::MAX;

/// The compiled policies of one protocol's listeners.
#[derive(Debug, Default)]
pub(crate) struct Routes {
    exact_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    wildcard_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    /// Gateway API wildcards (`*.suffix`, one or more labels), by suffix.
    suffix_hosts: FxMap<Arc<str>, Arc<HostRoutes>>,
    any_host: Arc<HostRoutes>,
    default: Option<Action>,
    made_from: MadeFrom,
}

/// The rules one host can match, ranked by their order among themselves.
#[derive(Debug, Default)]
pub(crate) struct HostRoutes {
    paths: PathTable,
    /// Policy actions by rank.
    targets: Vec<Action>,
    /// The header conditions of the policies that have some, by rank.
    guards: FxMap<u32, Arc<Guard>>,
    /// The rate limiters the targets use (carried into the next table).
    limiters: Box<[Arc<Limiter>]>,
}

/// What routes were compiled from: the listeners' policies in order (held, so that a pointer
/// is never another policy's), each one's group, the groups' sizes, and the default pool.
#[derive(Debug, Default)]
struct MadeFrom {
    policies: Vec<Arc<L7Policy>>,
    groups: Vec<u32>,
    keys: Arc<Keys>,
    counts: Vec<u32>,
    default: Option<PoolId>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Any,
    Exact,
    Wildcard,
    Suffix,
}

/// The groups' host keys by id: ids only ever added, shared between successive routes.
#[derive(Debug, Clone)]
struct Keys {
    names: Vec<(Kind, Arc<str>)>,
    exact: FxMap<Arc<str>, u32>,
    wildcard: FxMap<Arc<str>, u32>,
    suffix: FxMap<Arc<str>, u32>,
}

impl Default for Keys {
    fn default() -> Self {
        Keys {
            names: vec![(Kind::Any, Arc::from(""))],
            exact: FxMap::default(),
            wildcard: FxMap::default(),
            suffix: FxMap::default(),
        }
    }
}

impl Keys {
    fn len(&self) -> usize {
        self.names.len()
    }

    /// The group of `host`, added if new.
    fn id(&mut self, host: HostMatch) -> u32 {
        let (kind, name, map) = match host {
            HostMatch::Any => return ANY,
            HostMatch::Exact(h) => (Kind::Exact, h, &mut self.exact),
            HostMatch::Wildcard(s) => (Kind::Wildcard, s, &mut self.wildcard),
            HostMatch::Suffix(s) => (Kind::Suffix, s, &mut self.suffix),
        };
        if let Some(&id) = map.get(name.as_str()) {
            return id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(NEVER - 1);
        let name: Arc<str> = Arc::from(name);
        map.insert(name.clone(), id);
        self.names.push((kind, name));
        id
    }

    /// The groups whose rules the table of group `id` holds, its own included.
    fn holds(&self, id: u32, out: &mut Vec<u32>) {
        out.clear();
        let (kind, name) = &self.names[id as usize];
        let suffix = |s: &str| self.suffix.get(s).copied();
        match kind {
            Kind::Any => {}
            Kind::Exact => {
                out.push(id);
                let wildcard = wildcard_suffix(name).and_then(|w| self.wildcard.get(w));
                out.extend(wildcard.copied());
                out.extend(suffixes(name).filter_map(suffix));
            }
            Kind::Wildcard => {
                out.push(id);
                out.extend(
                    std::iter::once(&**name)
                        .chain(suffixes(name))
                        .filter_map(suffix),
                );
            }
            Kind::Suffix => {
                out.extend(
                    std::iter::once(&**name)
                        .chain(suffixes(name))
                        .filter_map(suffix),
                );
            }
        }
        out.push(ANY);
    }
}

/// A policy compiled once per compile, whatever number of tables holds it.
struct Compiled {
    action: Action,
    path: PathMatch,
    guard: Option<Arc<Guard>>,
}

impl Routes {
    /// The action of the first policy matching the request, else the default.
    pub(crate) fn action(
        &self,
        host: &str,
        path: &str,
        headers: &dyn RequestHeaders,
    ) -> Option<&Action> {
        let host = normalize_host(host);
        self.table_for(&host)
            .action(path, headers)
            .or(self.default.as_ref())
    }

    /// The one table that holds every rule `host` can match: its own, else its one-label
    /// wildcard's, else its longest suffix wildcard's, else the host-less one.
    fn table_for(&self, host: &str) -> &HostRoutes {
        if let Some(table) = self.exact_hosts.get(host) {
            return table;
        }
        let wildcard = wildcard_suffix(host).and_then(|s| self.wildcard_hosts.get(s));
        let suffix = || suffixes(host).find_map(|s| self.suffix_hosts.get(s));
        wildcard.or_else(suffix).unwrap_or(&self.any_host)
    }

    /// The rate limiters every table uses.
    pub(crate) fn limiters(&self) -> impl Iterator<Item = &Arc<Limiter>> {
        let tables = (self.exact_hosts.values())
            .chain(self.wildcard_hosts.values())
            .chain(self.suffix_hosts.values())
            .chain(std::iter::once(&self.any_host));
        tables.flat_map(|t| t.limiters.iter())
    }

    /// Whether `listeners` (in the order compiled) have exactly the policies (the same
    /// pointers, in the same order) and the default pool these routes were compiled from.
    pub(crate) fn made_of(&self, listeners: &[&Listener]) -> bool {
        let made = &self.made_from;
        let mut at = 0;
        for listener in listeners {
            let theirs = &listener.policies;
            let Some(ours) = made.policies.get(at..at + theirs.len()) else {
                return false;
            };
            if !ours.iter().zip(theirs).all(|(a, b)| Arc::ptr_eq(a, b)) {
                return false;
            }
            at += theirs.len();
        }
        at == made.policies.len() && default_pool(listeners) == made.default
    }

    /// The tables whose rules are unchanged are shared with `over`'s, when given; `changed`:
    /// the pools whose state is not `over`'s table's.
    pub(crate) fn compile(
        compiler: &Compiler<'_>,
        listeners: &[&Listener],
        over: Option<&Routes>,
        changed: &PoolSet,
    ) -> Routes {
        // A group list mostly of hosts that are gone is started afresh.
        let over = over.filter(|o| {
            let live = o.made_from.counts.iter().filter(|&&c| c > 0).count();
            o.made_from.keys.len() <= 2 * live + 64
        });
        let count: usize = listeners.iter().map(|l| l.policies.len()).sum();
        let mut keys = over.map_or_else(Arc::default, |o| o.made_from.keys.clone());
        let mut dirty = vec![over.is_none(); keys.len()];
        let mut counts = vec![0u32; keys.len()];
        let mut policies = Vec::with_capacity(count);
        let mut groups = Vec::with_capacity(count);
        let index: FxMap<*const L7Policy, u32> = over.map_or_else(FxMap::default, |o| {
            let mut index = FxMap::default();
            index.reserve(o.made_from.policies.len());
            for (i, p) in o.made_from.policies.iter().enumerate() {
                index.insert(Arc::as_ptr(p), u32::try_from(i).unwrap_or(u32::MAX));
            }
            index
        });
        // The path rules of the policies reduced on the way (the new ones).
        let mut paths: FxMap<u32, PathMatch> = FxMap::default();
        // The greatest previous position among the policies walked so far.
        let mut latest: Option<u32> = None;
        for policy in listeners.iter().flat_map(|l| &l.policies) {
            let before = (index.get(&Arc::as_ptr(policy)).copied())
                .and_then(|i| Some((i, *over?.made_from.groups.get(i as usize)?)));
            let group = match before {
                Some((i, group)) => {
                    if latest.is_some_and(|l| i <= l) && group != NEVER {
                        dirty[group as usize] = true;
                    }
                    latest = Some(latest.map_or(i, |l| l.max(i)));
                    group
                }
                None => match reduce(&policy.rules) {
                    Some((host, path)) => {
                        let at = u32::try_from(policies.len()).unwrap_or(u32::MAX);
                        paths.insert(at, path);
                        let group = Arc::make_mut(&mut keys).id(host);
                        dirty.resize(keys.len(), over.is_none());
                        counts.resize(keys.len(), 0);
                        dirty[group as usize] = true;
                        group
                    }
                    None => NEVER,
                },
            };
            if group != NEVER {
                counts[group as usize] += 1;
                if !changed.is_empty() && policy.pools().any(|p| changed.contains(&p)) {
                    dirty[group as usize] = true;
                }
            }
            policies.push(policy.clone());
            groups.push(group);
        }
        drop(index);
        if let Some(over) = over {
            for (group, &n) in over.made_from.counts.iter().enumerate() {
                dirty[group] |= counts[group] != n;
            }
        }
        // The tables to compile again: those holding a changed group. When only exact hosts'
        // groups changed, those hosts' tables alone.
        let shared = (dirty.iter().enumerate()).any(|(g, &d)| d && keys.names[g].0 != Kind::Exact);
        let mut holds = Vec::new();
        let mut again: Vec<u32> = Vec::new();
        let existed = |g: usize| over.is_some_and(|o| o.made_from.counts.get(g) > Some(&0));
        for g in 0..keys.len() {
            let id = u32::try_from(g).unwrap_or(NEVER);
            if g != ANY as usize && counts[g] == 0 && !existed(g) {
                continue;
            }
            if shared {
                keys.holds(id, &mut holds);
                if holds.iter().any(|&h| dirty[h as usize]) {
                    again.push(id);
                }
            } else if dirty[g] {
                again.push(id);
            }
        }
        // The positions of every group those tables hold, in order.
        let mut needed = vec![false; keys.len()];
        for &id in &again {
            keys.holds(id, &mut holds);
            holds.iter().for_each(|&h| needed[h as usize] = true);
        }
        let mut positions: FxMap<u32, Vec<u32>> = FxMap::default();
        for (at, &group) in groups.iter().enumerate() {
            if group != NEVER && needed[group as usize] {
                let at = u32::try_from(at).unwrap_or(u32::MAX);
                positions.entry(group).or_default().push(at);
            }
        }
        // Each of their policies compiled once; each regular expression too.
        let mut compiled: FxMap<u32, Compiled> = FxMap::default();
        for &at in positions.values().flatten() {
            let policy = &policies[at as usize];
            let reduced = || reduce(&policy.rules).map(|(_, path)| path);
            let Some(path) = paths.remove(&at).or_else(reduced) else {
                continue;
            };
            let guard: Guard = portico_model::matching::conditions(&policy.rules)
                .map(|condition| Check::compile(&condition))
                .collect();
            let compiled_policy = Compiled {
                action: compiler.action(policy),
                path,
                guard: (!guard.is_empty()).then(|| Arc::new(guard)),
            };
            compiled.insert(at, compiled_policy);
        }
        let mut regexes: FxMap<&str, Option<Regex>> = FxMap::default();
        for policy in compiled.values() {
            if let PathMatch::Regex(p) = &policy.path {
                regexes.entry(p).or_insert_with(|| path_regex(p, true));
            }
        }
        let regex = |p: &str| regexes.get(p).cloned().flatten();
        let (mut exact_hosts, mut wildcard_hosts, mut suffix_hosts, mut any_host) = match over {
            Some(o) => (
                o.exact_hosts.clone(),
                o.wildcard_hosts.clone(),
                o.suffix_hosts.clone(),
                o.any_host.clone(),
            ),
            None => Default::default(),
        };
        let mut merged = Vec::new();
        for &id in &again {
            let (kind, name) = &keys.names[id as usize];
            let table = match kind {
                Kind::Any => None,
                Kind::Exact => Some(&mut exact_hosts),
                Kind::Wildcard => Some(&mut wildcard_hosts),
                Kind::Suffix => Some(&mut suffix_hosts),
            };
            keys.holds(id, &mut holds);
            merged.clear();
            for h in &holds {
                merged.extend(positions.get(h).into_iter().flatten().copied());
            }
            merged.sort_unstable();
            let built = Arc::new(HostRoutes::build(&merged, &compiled, &regex));
            match table {
                None => any_host = built,
                Some(table) if counts[id as usize] == 0 => {
                    table.remove(&**name);
                }
                Some(table) => {
                    table.insert(name.clone(), built);
                }
            }
        }
        let default = default_pool(listeners);
        Routes {
            exact_hosts,
            wildcard_hosts,
            suffix_hosts,
            any_host,
            default: default.map(|pool| Action::One(compiler.resolved(pool))),
            made_from: MadeFrom {
                policies,
                groups,
                keys,
                counts,
                default,
            },
        }
    }
}

/// The first default pool of `listeners`: only it serves.
fn default_pool(listeners: &[&Listener]) -> Option<PoolId> {
    listeners.iter().find_map(|l| l.default_pool)
}

impl HostRoutes {
    /// The action of the best-ranked policy matching `path` whose conditions hold.
    fn action(&self, path: &str, headers: &dyn RequestHeaders) -> Option<&Action> {
        let accept = |rank: u32| self.guards.get(&rank).is_none_or(|g| holds(g, headers));
        let rank = self.paths.lookup(path, &accept)?;
        self.targets.get(rank as usize)
    }

    /// The table of the policies at `positions` (in order), compiled in `compiled`.
    fn build(
        positions: &[u32],
        compiled: &FxMap<u32, Compiled>,
        regex: &dyn Fn(&str) -> Option<Regex>,
    ) -> Self {
        let mut targets = Vec::with_capacity(positions.len());
        let mut guards = FxMap::default();
        let mut entries = Vec::with_capacity(positions.len());
        let policies = positions.iter().filter_map(|at| compiled.get(at));
        for (rank, policy) in policies.enumerate() {
            let rank = u32::try_from(rank).unwrap_or(u32::MAX);
            targets.push(policy.action.clone());
            if let Some(guard) = &policy.guard {
                guards.insert(rank, guard.clone());
            }
            entries.push((&policy.path, rank, policy.guard.is_some()));
        }
        let mut limiters: Vec<Arc<Limiter>> = Vec::new();
        for target in targets.iter().flat_map(Action::targets) {
            if let Target::Options(_, options) = target
                && let Some(limiter) = &options.rate_limit
                && !limiters.iter().any(|l| Arc::ptr_eq(l, limiter))
            {
                limiters.push(limiter.clone());
            }
        }
        HostRoutes {
            paths: PathTable::build(entries, regex),
            targets,
            guards,
            limiters: limiters.into_boxed_slice(),
        }
    }
}

/// The limiters of `routes`, by settings.
pub(crate) fn limiters<'a>(
    routes: impl IntoIterator<Item = &'a Routes>,
) -> FxMap<RateLimit, Arc<Limiter>> {
    let mut out = FxMap::default();
    for limiter in routes.into_iter().flat_map(Routes::limiters) {
        out.entry(limiter.settings().clone())
            .or_insert_with(|| limiter.clone());
    }
    out
}

#[cfg(test)]
impl Routes {
    /// How many of these routes' tables are `other`'s very tables, and how many there are.
    pub(crate) fn tables_shared_with(&self, other: &Routes) -> (usize, usize) {
        let pairs = |ours: &FxMap<Arc<str>, Arc<HostRoutes>>,
                     theirs: &FxMap<Arc<str>, Arc<HostRoutes>>| {
            let shared = (ours.iter())
                .filter(|(k, t)| theirs.get(&***k).is_some_and(|o| Arc::ptr_eq(o, t)))
                .count();
            (shared, ours.len())
        };
        let all = [
            pairs(&self.exact_hosts, &other.exact_hosts),
            pairs(&self.wildcard_hosts, &other.wildcard_hosts),
            pairs(&self.suffix_hosts, &other.suffix_hosts),
            (usize::from(Arc::ptr_eq(&self.any_host, &other.any_host)), 1),
        ];
        all.iter().fold((0, 0), |(s, n), (a, b)| (s + a, n + b))
    }
}
