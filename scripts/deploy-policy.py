#!/usr/bin/env python3
"""Portico's deployment policy, checked on a rendered variant (`deploy/`, the Deployment, or
`deploy/daemonset/`, the DaemonSet) and the Dockerfile.

Schema validity is kubernetes-validate's job (scripts/deploy-check.sh); this script checks what
a schema cannot: the RBAC rules, as bound to Portico's ServiceAccount, grant exactly the
allowed set (docs/kubernetes.md says why each), the pod runs non-root with a read-only root
filesystem and no privileges, the Service exposes traffic ports only, and the Dockerfile is
multi-stage, ends non-root and fetches nothing with ADD. The DaemonSet alone may use the host's
network and one hostPath, its state directory, and must surge (maxSurge 1, maxUnavailable 0)
with --take-over and no container ports (host ports would keep the new pod off the node).

Usage: deploy-policy.py RENDERED.yaml Dockerfile [--self-test]
--self-test also checks that every mutation in MUTATIONS (an extra verb, a wildcard, a root
user, ...) is caught. Needs PyYAML (kubernetes-validate's venv has it).
"""

import copy
import re
import sys

import yaml

NAMESPACE = "portico-system"
NAME = "portico"
SUBJECT = {"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}
READ = ("get", "list", "watch")

# (scope, apiGroup, resource) -> verbs. Scope "cluster" is a ClusterRoleBinding; a namespace
# is a RoleBinding there.
ALLOWED = {
    ("cluster", "networking.k8s.io", "ingresses"): READ,
    ("cluster", "networking.k8s.io", "ingressclasses"): READ,
    ("cluster", "", "services"): READ,
    ("cluster", "", "secrets"): READ,
    ("cluster", "", "namespaces"): READ,
    ("cluster", "discovery.k8s.io", "endpointslices"): READ,
    ("cluster", "networking.k8s.io", "ingresses/status"): ("update", "patch"),
    ("cluster", "", "services/status"): ("update", "patch"),
    ("cluster", "events.k8s.io", "events"): ("create", "patch"),
    ("cluster", "gateway.networking.k8s.io", "gatewayclasses"): READ,
    ("cluster", "gateway.networking.k8s.io", "gateways"): READ,
    ("cluster", "gateway.networking.k8s.io", "httproutes"): READ,
    ("cluster", "gateway.networking.k8s.io", "referencegrants"): READ,
    ("cluster", "gateway.networking.k8s.io", "tcproutes"): READ,
    ("cluster", "gateway.networking.k8s.io", "udproutes"): READ,
    ("cluster", "gateway.networking.k8s.io", "tlsroutes"): READ,
    ("cluster", "gateway.networking.k8s.io", "grpcroutes"): READ,
    ("cluster", "gateway.networking.k8s.io", "listenersets"): READ,
    ("cluster", "gateway.networking.k8s.io", "gatewayclasses/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "gateways/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "httproutes/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "tcproutes/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "udproutes/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "tlsroutes/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "grpcroutes/status"): ("update", "patch"),
    ("cluster", "gateway.networking.k8s.io", "listenersets/status"): ("update", "patch"),
    (NAMESPACE, "coordination.k8s.io", "leases"): ("get", "create", "update"),
}
EXPECTED = {key + (verb,) for key, verbs in ALLOWED.items() for verb in verbs}

TRAFFIC_PORTS = {80: 8080, 443: 8443}
ADMIN_PORT = 9180
PROBES = {"livenessProbe": "/healthz", "readinessProbe": "/readyz"}


def of_kind(objects, *kinds):
    return [o for o in objects if o.get("kind") in kinds]


def ident(obj):
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


# ---- RBAC -------------------------------------------------------------------------------


def role_key(kind, namespace, name):
    return (kind, namespace if kind == "Role" else None, name)


def rule_errors(role, rule):
    errors = []
    for field in ("apiGroups", "resources", "verbs"):
        if "*" in rule.get(field, []):
            errors.append(f"{ident(role)}: wildcard in {field}")
    if rule.get("nonResourceURLs"):
        errors.append(f"{ident(role)}: nonResourceURLs {rule['nonResourceURLs']}")
    return errors


def binding_grants(binding, roles):
    """The (scope, group, resource, verb) tuples one binding grants, and its errors."""
    errors, grants = [], set()
    ns = binding["metadata"].get("namespace")
    ref = binding.get("roleRef", {})
    role = roles.get(role_key(ref.get("kind"), ns, ref.get("name")))
    if role is None:
        return {
            f"{ident(binding)}: binds {ref.get('kind')} {ref.get('name')}, not in deploy/"
        }, grants
    if binding.get("subjects") != [SUBJECT]:
        errors.append(f"{ident(binding)}: subjects {binding.get('subjects')}, want [{SUBJECT}]")
    if role.get("aggregationRule"):
        errors.append(f"{ident(role)}: aggregationRule")
    scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else ns
    for rule in role.get("rules") or []:
        errors += rule_errors(role, rule)
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                grants |= {(scope, group, resource, verb) for verb in rule.get("verbs", [])}
    return set(errors), grants


def rbac_errors(objects):
    roles = {
        role_key(r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]): r
        for r in of_kind(objects, "Role", "ClusterRole")
    }
    errors, granted, bound = set(), set(), set()
    for binding in of_kind(objects, "RoleBinding", "ClusterRoleBinding"):
        more, grants = binding_grants(binding, roles)
        errors |= more
        granted |= grants
        ref = binding.get("roleRef", {})
        bound.add(role_key(ref.get("kind"), binding["metadata"].get("namespace"), ref.get("name")))
    errors |= {f"{ident(roles[k])}: bound by nothing" for k in roles.keys() - bound}
    errors |= {f"grants {g}, which is not allowed" for g in granted - EXPECTED}
    errors |= {f"does not grant {g}, which Portico needs" for g in EXPECTED - granted}
    return sorted(errors)


# ---- the pod ----------------------------------------------------------------------------


def container_errors(where, container):
    sc = container.get("securityContext") or {}
    caps = sc.get("capabilities") or {}
    checks = [
        (sc.get("readOnlyRootFilesystem") is True, "readOnlyRootFilesystem is not true"),
        (sc.get("allowPrivilegeEscalation") is False, "allowPrivilegeEscalation is not false"),
        (sc.get("privileged") is not True, "privileged"),
        ("ALL" in (caps.get("drop") or []), "capabilities.drop lacks ALL"),
        (not caps.get("add"), f"capabilities.add {caps.get('add')}"),
        (sc.get("runAsUser", 1) != 0, "runAsUser 0"),
        (sc.get("runAsNonRoot") is not False, "runAsNonRoot false"),
    ]
    return [f"{where}: {msg}" for ok, msg in checks if not ok]


def state_dir(pod):
    """The --state-dir of the pod's first container."""
    for arg in (pod.get("containers") or [{}])[0].get("args") or []:
        if arg.startswith("--state-dir="):
            return arg.split("=", 1)[1]
    return None


def host_path_errors(where, pod, daemonset):
    """A DaemonSet may mount one hostPath: an existing directory, at its --state-dir."""
    host = [v for v in pod.get("volumes") or [] if "hostPath" in v]
    if not daemonset:
        return [f"{where}: mounts a hostPath"] if host else []
    mounts = {
        m.get("name"): m.get("mountPath")
        for c in pod.get("containers") or []
        for m in c.get("volumeMounts") or []
    }
    errors = []
    for v in host:
        if mounts.get(v.get("name")) != state_dir(pod):
            errors.append(f"{where}: hostPath {v.get('name')} is not mounted at --state-dir")
        if v["hostPath"].get("type") != "Directory":
            errors.append(f"{where}: hostPath {v.get('name')} is not type Directory")
    return errors


def pod_errors(where, pod, daemonset=False):
    sc = pod.get("securityContext") or {}
    checks = [
        (sc.get("runAsNonRoot") is True, "securityContext.runAsNonRoot is not true"),
        (isinstance(sc.get("runAsUser"), int) and sc["runAsUser"] > 0, "runAsUser is not > 0"),
        (
            (sc.get("seccompProfile") or {}).get("type") == "RuntimeDefault",
            "seccomp is not RuntimeDefault",
        ),
        (pod.get("serviceAccountName") == NAME, f"serviceAccountName is not {NAME}"),
        (
            not any(pod.get(h) for h in ("hostPID", "hostIPC")),
            "shares a host namespace",
        ),
        (daemonset or not pod.get("hostNetwork"), "uses the host's network"),
    ]
    errors = [f"{where}: {msg}" for ok, msg in checks if not ok]
    errors += host_path_errors(where, pod, daemonset)
    for c in (pod.get("initContainers") or []) + (pod.get("containers") or []):
        errors += container_errors(f"{where} container {c.get('name')}", c)
    return errors


def named_ports(pod):
    return {
        p["name"]: p["containerPort"]
        for c in pod.get("containers") or []
        for p in c.get("ports") or []
        if "name" in p
    }


def probe_errors(where, pod):
    errors, ports = [], named_ports(pod)
    for c in pod.get("containers") or []:
        for probe, path in PROBES.items():
            get = (c.get(probe) or {}).get("httpGet") or {}
            port = ports.get(get.get("port"), get.get("port"))
            if (get.get("path"), port) != (path, ADMIN_PORT):
                errors.append(
                    f"{where} container {c.get('name')}: {probe} is not GET {path} on {ADMIN_PORT}"
                )
        if f"--admin-listen=0.0.0.0:{ADMIN_PORT}" not in (c.get("args") or []):
            errors.append(
                f"{where} container {c.get('name')}: admin API not on 0.0.0.0:{ADMIN_PORT}"
            )
    return errors


def surge_errors(where, daemonset):
    """The DaemonSet's update: the new pod beside the old one, taking its sockets over."""
    spec = daemonset["spec"]
    rolling = (spec.get("updateStrategy") or {}).get("rollingUpdate") or {}
    pod = spec["template"]["spec"]
    checks = [
        ((rolling.get("maxSurge"), rolling.get("maxUnavailable")) == (1, 0), "does not surge (maxSurge 1, maxUnavailable 0)"),
        (all("--take-over" in (c.get("args") or []) for c in pod.get("containers") or []), "lacks --take-over"),
        (not any(c.get("ports") for c in pod.get("containers") or []), "declares container ports (host ports on the host's network)"),
        (state_dir(pod) is not None, "has no --state-dir"),
    ]
    return [f"{where}: {msg}" for ok, msg in checks if not ok]


def workloads(objects):
    return of_kind(objects, "Deployment", "DaemonSet")


def workload_errors(objects):
    found = workloads(objects)
    errors = [] if len(found) == 1 else [f"{len(found)} Deployments and DaemonSets, want 1"]
    errors += [
        f"{ident(o)}: not expected in deploy/"
        for o in of_kind(objects, "Pod", "StatefulSet", "Job", "CronJob")
    ]
    accounts = {ident(a) for a in of_kind(objects, "ServiceAccount")}
    if f"ServiceAccount {NAMESPACE}/{NAME}" not in accounts:
        errors.append(f"no ServiceAccount {NAMESPACE}/{NAME}")
    for w in found:
        pod, daemonset = w["spec"]["template"]["spec"], w["kind"] == "DaemonSet"
        errors += pod_errors(ident(w), pod, daemonset) + probe_errors(ident(w), pod)
        errors += surge_errors(ident(w), w) if daemonset else []
    return errors


def service_errors(objects):
    found = workloads(objects)
    ports = named_ports(found[0]["spec"]["template"]["spec"]) if found else {}
    errors = []
    for svc in of_kind(objects, "Service"):
        spec = svc.get("spec", {})
        exposed = {
            p.get("port"): ports.get(p.get("targetPort"), p.get("targetPort"))
            for p in spec.get("ports", [])
        }
        if exposed != TRAFFIC_PORTS:
            errors.append(
                f"{ident(svc)}: exposes {exposed} (port: target), want exactly {TRAFFIC_PORTS}"
            )
        if spec.get("type") != "LoadBalancer":
            errors.append(f"{ident(svc)}: type {spec.get('type')}, want LoadBalancer")
    return errors


# ---- the Dockerfile ---------------------------------------------------------------------


def instructions(text):
    """(INSTRUCTION, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [
        (parts[0].upper(), parts[1] if len(parts) > 1 else "")
        for parts in (line.strip().split(None, 1) for line in joined.splitlines())
        if parts
    ]


def stages(text):
    out = []
    for op, args in instructions(text):
        if op == "FROM":
            out.append({"from": args, "user": None, "runs": False})
        elif out and op == "USER":
            out[-1]["user"] = args.strip()
        elif out and op in ("ENTRYPOINT", "CMD"):
            out[-1]["runs"] = True
    return out


def non_root_numeric(user):
    m = re.fullmatch(r"(\d+)(?::(\d+))?", user or "")
    return bool(m) and int(m.group(1)) != 0


def dockerfile_errors(text):
    found = stages(text)
    errors = (
        []
        if len(found) >= 2
        else [f"Dockerfile: {len(found)} FROM stage(s), want a multi-stage build"]
    )
    for i, stage in enumerate(found):
        final = i == len(found) - 1
        if (final or stage["runs"]) and not non_root_numeric(stage["user"]):
            errors.append(
                f"Dockerfile: stage FROM {stage['from']}: USER {stage['user']}, want a numeric non-root uid"
            )
    for op, args in instructions(text):
        if op == "ADD" and "://" in args:
            errors.append(
                f"Dockerfile: ADD {args}: fetches a URL (download in a RUN with a checksum instead)"
            )
    return errors


# ---- all together -----------------------------------------------------------------------


def all_errors(objects, dockerfile):
    return (
        rbac_errors(objects)
        + workload_errors(objects)
        + service_errors(objects)
        + dockerfile_errors(dockerfile)
    )


def find(objects, kind, name):
    return next(o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name)


def pod(objects):
    return workloads(objects)[0]["spec"]["template"]["spec"]


def daemonset(objects):
    """The DaemonSet variant's DaemonSet, or None (its mutations are skipped)."""
    return next(iter(of_kind(objects, "DaemonSet")), None)


def container(objects):
    return pod(objects)["containers"][0]


# Each mutation of (objects, Dockerfile text) must be caught; its name says what it breaks.
MUTATIONS = []


def mutation(change):
    MUTATIONS.append(change)
    return change


@mutation
def extra_verb_on_leases(o, d):
    find(o, "Role", "portico-leader-election")["rules"][0]["verbs"].append("delete")
    return o, d


@mutation
def wildcard_resource(o, d):
    find(o, "ClusterRole", NAME)["rules"][0]["resources"].append("*")
    return o, d


@mutation
def extra_resource(o, d):
    find(o, "ClusterRole", NAME)["rules"][0]["resources"].append("configmaps")
    return o, d


@mutation
def leases_cluster_wide(o, d):
    rule = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get"]}
    find(o, "ClusterRole", NAME)["rules"].append(rule)
    return o, d


@mutation
def missing_grant(o, d):
    find(o, "ClusterRole", NAME)["rules"].pop()
    return o, d


@mutation
def extra_subject(o, d):
    group = {"kind": "Group", "name": "system:authenticated"}
    find(o, "ClusterRoleBinding", NAME)["subjects"].append(group)
    return o, d


@mutation
def bound_to_cluster_admin(o, d):
    find(o, "ClusterRoleBinding", NAME)["roleRef"]["name"] = "cluster-admin"
    return o, d


@mutation
def no_service_account(o, d):
    o.remove(find(o, "ServiceAccount", NAME))
    return o, d


@mutation
def writable_root_filesystem(o, d):
    container(o)["securityContext"]["readOnlyRootFilesystem"] = False
    return o, d


@mutation
def privilege_escalation_allowed(o, d):
    del container(o)["securityContext"]["allowPrivilegeEscalation"]
    return o, d


@mutation
def capabilities_kept(o, d):
    container(o)["securityContext"]["capabilities"]["drop"] = []
    return o, d


@mutation
def root_user(o, d):
    pod(o)["securityContext"]["runAsUser"] = 0
    return o, d


@mutation
def admin_port_exposed(o, d):
    port = {"name": "admin", "port": ADMIN_PORT, "targetPort": "admin"}
    find(o, "Service", NAME)["spec"]["ports"].append(port)
    return o, d


@mutation
def dockerfile_ends_as_root(o, d):
    return o, d + "\nUSER root\n"


@mutation
def dockerfile_named_user(o, d):
    return o, d.replace("USER 65532:65532", "USER nonroot")


@mutation
def dockerfile_adds_a_url(o, d):
    return o, d + "\nADD https://example.com/x.tar.gz /x\n"


@mutation
def dockerfile_single_stage(o, d):
    return o, 'FROM debian:bookworm-slim\nUSER 65532\nENTRYPOINT ["/portico"]\n'


@mutation
def host_network_in_the_deployment(o, d):
    if daemonset(o):
        return None
    pod(o)["hostNetwork"] = True
    return o, d


@mutation
def host_path_in_the_deployment(o, d):
    if daemonset(o):
        return None
    pod(o)["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    return o, d


@mutation
def daemonset_without_surge(o, d):
    if not daemonset(o):
        return None
    daemonset(o)["spec"]["updateStrategy"]["rollingUpdate"]["maxSurge"] = 0
    return o, d


@mutation
def daemonset_without_take_over(o, d):
    if not daemonset(o):
        return None
    container(o)["args"].remove("--take-over")
    return o, d


@mutation
def daemonset_with_a_host_port(o, d):
    if not daemonset(o):
        return None
    container(o)["ports"] = [{"name": "http", "containerPort": 8080}]
    return o, d


@mutation
def daemonset_mounts_another_host_path(o, d):
    if not daemonset(o):
        return None
    pod(o)["volumes"].append({"name": "root", "hostPath": {"path": "/", "type": "Directory"}})
    container(o)["volumeMounts"].append({"name": "root", "mountPath": "/host"})
    return o, d


def self_test(objects, dockerfile):
    missed = []
    for change in MUTATIONS:
        name = change.__name__.replace("_", " ")
        changed = change(copy.deepcopy(objects), dockerfile)
        if changed is None:
            continue
        errors = all_errors(*changed)
        print(f"  self-test {name}: {'caught: ' + errors[0] if errors else 'MISSED'}")
        if not errors:
            missed.append(name)
    return missed


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--self-test"):
        sys.exit(__doc__)
    with open(argv[1]) as f:
        objects = [o for o in yaml.safe_load_all(f) if o]
    with open(argv[2]) as f:
        dockerfile = f.read()
    errors = all_errors(objects, dockerfile)
    for error in errors:
        print(f"policy: {error}", file=sys.stderr)
    if errors:
        return 1
    print(
        f"policy: RBAC grants exactly {len(EXPECTED)} (scope, group, resource, verb); "
        "pod non-root, read-only, no privileges; Service 80/443 only; Dockerfile multi-stage, non-root"
    )
    if len(argv) == 4:
        missed = self_test(objects, dockerfile)
        if missed:
            print(f"policy: self-test missed: {missed}", file=sys.stderr)
            return 1
        print("policy: self-test: every mutation that applies caught")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
