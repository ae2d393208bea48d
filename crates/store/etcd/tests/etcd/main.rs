//! The etcd backend against real etcd processes (portico-testkit's `EtcdCluster`).

mod atomic;
mod basic;
mod cache;
mod claims;
mod cluster;
mod contract;
mod election;
mod outage;
mod proxy;
mod security;
mod support;
mod swap;
