#!/usr/bin/env bash
# Checks deploy/ (and its DaemonSet variant, deploy/daemonset/) and the Dockerfile offline: each
# variant renders with `kubectl kustomize`, every rendered
# object validates strictly (unknown fields are errors) against the Kubernetes schemas, and
# scripts/deploy-policy.py finds RBAC exactly least-privilege, the pod locked down, the Service
# on 80/443 only and the Dockerfile multi-stage and non-root. Each check is first shown to fail
# on a deliberately broken copy. Installs kubectl and kubernetes-validate when missing.
# Usage: bash scripts/deploy-check.sh
set -euo pipefail
cd "$(dirname "$0")/.."

source scripts/lib.sh

KUBERNETES_VALIDATE=1.37.0
# The oldest and the newest Kubernetes the manifests are checked against (schemas shipped
# with kubernetes-validate $KUBERNETES_VALIDATE).
KUBE_VERSIONS=(1.30.0 1.37.0)
VENV=target/deploy-check/venv

# kubectl with its built-in kustomize: the machine image's, else Debian's kubernetes-client.
command -v kubectl >/dev/null || apt_install kubernetes-client
kubectl version --client 2>/dev/null | sed 's/^/  /'

# kubernetes-validate (and PyYAML, its dependency, for the policy script) in a venv.
if [ "$("$VENV/bin/kubernetes-validate" --version 2>/dev/null)" != "$KUBERNETES_VALIDATE" ]; then
  python3 -c 'import ensurepip, venv' 2>/dev/null || apt_install python3-venv
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$KUBERNETES_VALIDATE"
fi
"$VENV/bin/kubernetes-validate" --help >/dev/null
echo "  kubernetes-validate $("$VENV/bin/kubernetes-validate" --version)"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

kubectl kustomize deploy/ >"$tmp/rendered.yaml"
echo "  rendered $(grep -c '^kind:' "$tmp/rendered.yaml") objects"
kubectl kustomize deploy/daemonset/ >"$tmp/daemonset.yaml"
echo "  rendered $(grep -c '^kind:' "$tmp/daemonset.yaml") objects of the DaemonSet variant"

validate() {
  local file=$1 version
  for version in "${KUBE_VERSIONS[@]}"; do
    "$VENV/bin/kubernetes-validate" --strict --quiet --kubernetes-version "$version" "$file" || return 1
  done
}

# A typo the API server would drop with a mere warning must fail here.
sed 's/readOnlyRootFilesystem: true/readOnlyRootFileSystem: true/' "$tmp/rendered.yaml" >"$tmp/broken.yaml"
if validate "$tmp/broken.yaml" >"$tmp/broken.log" 2>&1; then
  echo "kubernetes-validate accepted a manifest with an unknown field" >&2
  exit 1
fi
if ! grep -q "'readOnlyRootFileSystem' was unexpected" "$tmp/broken.log"; then
  cat "$tmp/broken.log" >&2
  exit 1
fi
echo "  a broken copy (readOnlyRootFileSystem) fails validation, as it must"

validate "$tmp/rendered.yaml"
validate "$tmp/daemonset.yaml"
echo "  every object of both variants validates (strict) against Kubernetes ${KUBE_VERSIONS[*]}"

"$VENV/bin/python" scripts/deploy-policy.py "$tmp/rendered.yaml" Dockerfile --self-test
"$VENV/bin/python" scripts/deploy-policy.py "$tmp/daemonset.yaml" Dockerfile --self-test
