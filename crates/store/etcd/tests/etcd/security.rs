//! TLS with client certificates, and user/password authentication.

use crate::support::{State, config, ops, state};
use portico_store_etcd::{Etcd, EtcdError, TlsFiles};
use portico_testkit::EtcdCluster;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_only_etcd_wants_the_client_certificate() {
    let cluster = EtcdCluster::start_tls();
    let files = cluster.tls().expect("TLS cluster").clone();
    let mut without = config(cluster.endpoints());
    without.tls = Some(TlsFiles {
        ca: files.ca.clone(),
        cert: None,
        key: None,
    });
    let refused = Etcd::connect(without)
        .await
        .expect_err("no client certificate");
    eprintln!("without a client certificate: {refused}");
    assert!(matches!(refused, EtcdError::Connect { .. }), "{refused:?}");
    assert!(
        refused.to_string().contains(&cluster.endpoints()[0]),
        "{refused}"
    );

    let plain = Etcd::connect(config(cluster.endpoints())).await;
    let plain = plain.expect_err("plain HTTP to a TLS member");
    eprintln!("over plain HTTP: {plain}");

    let mut with = config(cluster.endpoints());
    with.tls = Some(TlsFiles {
        ca: files.ca.clone(),
        cert: Some(files.client_cert.clone()),
        key: Some(files.client_key.clone()),
    });
    let etcd = Etcd::connect(with)
        .await
        .expect("with the client certificate");
    let leader = etcd
        .campaign("tls", Duration::from_secs(2))
        .await
        .expect("campaign");
    let desired = state("tls", 0..3);
    etcd.commit(&leader, ops(&State::new(), &desired))
        .await
        .expect("commit");
    assert_eq!(etcd.read_desired().await.expect("read").entries.len(), 3);

    let mut missing = config(cluster.endpoints());
    missing.tls_required = true;
    let invalid = Etcd::connect(missing)
        .await
        .expect_err("etcds:// without files");
    assert!(invalid.to_string().contains("TLS"), "{invalid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_and_password_authenticate_and_bad_ones_are_refused() {
    let cluster = EtcdCluster::start(1);
    cluster.etcdctl(&["user", "add", "root:s3cret-pw", "--interactive=false"]);
    cluster.etcdctl(&["auth", "enable"]);

    let mut good = config(cluster.endpoints());
    good.user = Some("root".into());
    good.password = Some("s3cret-pw".into());
    let etcd = Etcd::connect(good.clone()).await.expect("authenticated");
    let leader = etcd
        .campaign("auth", Duration::from_secs(2))
        .await
        .expect("campaign");
    let desired = state("auth", 0..2);
    etcd.commit(&leader, ops(&State::new(), &desired))
        .await
        .expect("commit");

    let mut bad = good.clone();
    bad.password = Some("wrong".into());
    let refused = Etcd::connect(bad).await.expect_err("wrong password");
    eprintln!("wrong password: {refused}");
    assert!(
        refused.to_string().contains("authentication failed"),
        "{refused}"
    );
    assert!(
        !refused.to_string().contains("wrong"),
        "no password in errors"
    );

    let anonymous = Etcd::connect(config(cluster.endpoints())).await;
    let anonymous = anonymous.expect_err("no credentials");
    eprintln!("no credentials: {anonymous}");
    assert!(
        !format!("{good:?}").contains("s3cret-pw"),
        "no password in Debug"
    );
}
