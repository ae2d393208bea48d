use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn pool(cidr: &str) -> Want {
    Want::Pool {
        pool: cidr.parse().unwrap(),
        field: "--vip-pool".into(),
    }
}

fn pinned(addr: &str) -> Want {
    Want::Pinned {
        ip: ip(addr),
        field: "metadata.annotations[portico.dev/external-ip]".into(),
    }
}

fn request(name: &str, vip: Want, floating_ip: Want) -> AddressRequest {
    AddressRequest {
        id: LoadBalancerId::derive(name),
        object: ObjectRef::new("Ingress", "ns", name),
        vip,
        floating_ip,
    }
}

fn vips(allocations: &Allocations, names: &[&str]) -> Vec<Option<IpAddr>> {
    names
        .iter()
        .map(|n| allocations[&LoadBalancerId::derive(n)].vip)
        .collect()
}

#[test]
fn pools_hand_out_their_lowest_free_address_skipping_the_network_address() {
    let requests = [
        request("a", pool("198.18.0.0/24"), pool("198.19.0.0/24")),
        request("b", pool("198.18.0.0/24"), pool("198.19.0.0/24")),
    ];
    let (got, diagnostics) = allocate(&Allocations::new(), &requests);
    assert!(diagnostics.is_empty());
    assert_eq!(
        vips(&got, &["a", "b"]),
        [Some(ip("198.18.0.1")), Some(ip("198.18.0.2"))]
    );
    assert_eq!(
        got[&LoadBalancerId::derive("b")].floating_ip,
        Some(ip("198.19.0.2"))
    );
}

#[test]
fn allocations_are_sticky_whatever_the_order_of_requests() {
    let previous = Allocations::from([(
        LoadBalancerId::derive("b"),
        Addresses {
            vip: Some(ip("198.18.0.1")),
            floating_ip: None,
        },
    )]);
    let requests = [
        request("a", pool("198.18.0.0/24"), Want::None),
        request("b", pool("198.18.0.0/24"), Want::None),
    ];
    let (got, _) = allocate(&previous, &requests);
    assert_eq!(
        vips(&got, &["a", "b"]),
        [Some(ip("198.18.0.2")), Some(ip("198.18.0.1"))]
    );
    // An address outside the (changed) pool is not kept.
    let moved = [request("b", pool("198.18.1.0/24"), Want::None)];
    assert_eq!(
        vips(&allocate(&previous, &moved).0, &["b"]),
        [Some(ip("198.18.1.1"))]
    );
}

#[test]
fn a_released_address_is_reused_by_the_next_load_balancer() {
    let requests = [
        request("a", pool("198.18.0.0/24"), Want::None),
        request("b", pool("198.18.0.0/24"), Want::None),
    ];
    let (first, _) = allocate(&Allocations::new(), &requests);
    // "a" goes; "c" comes and gets the address "a" had.
    let next = [
        request("b", pool("198.18.0.0/24"), Want::None),
        request("c", pool("198.18.0.0/24"), Want::None),
    ];
    let (second, _) = allocate(&first, &next);
    assert_eq!(
        vips(&second, &["b", "c"]),
        [Some(ip("198.18.0.2")), Some(ip("198.18.0.1"))]
    );
    assert!(!second.contains_key(&LoadBalancerId::derive("a")));
}

#[test]
fn a_pinned_address_in_use_is_a_diagnostic_on_the_asker_and_blocks_nothing_else() {
    let requests = [
        request("a", Want::None, pool("198.19.0.0/30")),
        request("b", Want::None, pinned("198.19.0.1")),
        request("c", Want::None, pinned("198.19.0.9")),
    ];
    let (first, _) = allocate(&Allocations::new(), &requests[..1]);
    let (got, diagnostics) = allocate(&first, &requests);
    let fip = |n: &str| got[&LoadBalancerId::derive(n)].floating_ip;
    assert_eq!(fip("a"), Some(ip("198.19.0.1")));
    assert_eq!(fip("b"), None);
    assert_eq!(fip("c"), Some(ip("198.19.0.9")));
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].object.name, "b");
    assert!(diagnostics[0].field.contains("portico.dev/external-ip"));
    assert!(
        diagnostics[0].message.contains("198.19.0.1"),
        "{diagnostics:?}"
    );
}

#[test]
fn a_pinned_address_is_kept_by_its_holder_and_refused_to_a_newcomer() {
    let first = allocate(
        &Allocations::new(),
        &[request("b", Want::None, pinned("198.19.0.5"))],
    )
    .0;
    let requests = [
        request("a", Want::None, pinned("198.19.0.5")),
        request("b", Want::None, pinned("198.19.0.5")),
    ];
    let (got, diagnostics) = allocate(&first, &requests);
    assert_eq!(
        got[&LoadBalancerId::derive("b")].floating_ip,
        Some(ip("198.19.0.5"))
    );
    assert_eq!(got[&LoadBalancerId::derive("a")].floating_ip, None);
    assert_eq!(diagnostics[0].object.name, "a");
}

#[test]
fn an_exhausted_pool_is_a_diagnostic_and_the_others_keep_their_addresses() {
    // A /30 has two usable addresses.
    let requests = [
        request("a", pool("198.18.0.0/30"), pool("198.19.0.0/24")),
        request("b", pool("198.18.0.0/30"), pool("198.19.0.0/24")),
        request("c", pool("198.18.0.0/30"), pool("198.19.0.0/24")),
    ];
    let (got, diagnostics) = allocate(&Allocations::new(), &requests);
    assert_eq!(
        vips(&got, &["a", "b", "c"]),
        [Some(ip("198.18.0.1")), Some(ip("198.18.0.2")), None]
    );
    assert_eq!(
        got[&LoadBalancerId::derive("c")].floating_ip,
        Some(ip("198.19.0.3"))
    );
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].object.name, "c");
    assert!(diagnostics[0].message.contains("exhausted"));
}

#[test]
fn fixed_addresses_are_shared_and_never_handed_out_by_a_pool() {
    let requests = [
        request("a", Want::Fixed(ip("198.18.0.1")), Want::None),
        request("b", Want::Fixed(ip("198.18.0.1")), Want::None),
        request("c", pool("198.18.0.0/24"), pinned("198.18.0.1")),
    ];
    let (got, diagnostics) = allocate(&Allocations::new(), &requests);
    assert_eq!(
        vips(&got, &["a", "b", "c"]),
        [
            Some(ip("198.18.0.1")),
            Some(ip("198.18.0.1")),
            Some(ip("198.18.0.2"))
        ]
    );
    assert_eq!(diagnostics.len(), 1, "{diagnostics:?}");
    assert_eq!(diagnostics[0].object.name, "c");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// A want over a /29 pool (6 usable addresses) and pins inside and outside it.
    fn want() -> impl Strategy<Value = Want> {
        prop_oneof![
            Just(Want::None),
            Just(pool("198.18.0.0/29")),
            (0..10u8).prop_map(|i| pinned(&format!("198.18.0.{i}"))),
            (0..2u8).prop_map(|i| Want::Fixed(ip(&format!("198.18.0.{}", i + 1)))),
        ]
    }

    fn requests() -> impl Strategy<Value = Vec<AddressRequest>> {
        prop::collection::vec((want(), want()), 0..9).prop_map(|wants| {
            wants
                .into_iter()
                .enumerate()
                .map(|(i, (vip, fip))| request(&format!("lb{i}"), vip, fip))
                .collect()
        })
    }

    proptest! {
        /// Whatever was there before: no address goes to two load balancers (fixed ones
        /// aside), pool addresses are usable ones of their pool, pins are honoured or refused
        /// with a diagnostic, every want is met or reported, and allocating again with the
        /// result as the previous allocations changes nothing.
        #[test]
        fn allocations_are_exclusive_valid_and_stable(
            before in requests(),
            now in requests(),
        ) {
            let (previous, _) = allocate(&Allocations::new(), &before);
            let (got, diagnostics) = allocate(&previous, &now);
            let mut owners: BTreeMap<IpAddr, LoadBalancerId> = BTreeMap::new();
            let mut unmet = 0;
            for r in &now {
                let a = got[&r.id];
                for (want, have) in [(&r.vip, a.vip), (&r.floating_ip, a.floating_ip)] {
                    match (want, have) {
                        (Want::None, h) => prop_assert_eq!(h, None),
                        (Want::Fixed(ip), h) => prop_assert_eq!(h, Some(*ip)),
                        (Want::Pinned { ip, .. }, Some(h)) => prop_assert_eq!(h, *ip),
                        (Want::Pool { pool, .. }, Some(h)) => prop_assert!(pool.usable(h)),
                        (_, None) => unmet += 1,
                    }
                    if let (Some(h), false) = (have, matches!(want, Want::Fixed(_))) {
                        let owner = owners.insert(h, r.id);
                        prop_assert!(owner.is_none() || owner == Some(r.id), "{h} given twice");
                    }
                }
            }
            prop_assert_eq!(unmet, diagnostics.len());
            let (again, _) = allocate(&got, &now);
            prop_assert_eq!(again, got);
        }
    }
}
