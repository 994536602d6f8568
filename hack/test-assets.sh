#!/usr/bin/env bash
# Builds the pinned test-bed binaries into bin/, skipping any that already exist.
# Versions are pinned in hack/kube/go.mod, hack/etcd/go.mod and the Makefile.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
KWOK_VERSION=${KWOK_VERSION:?set by the Makefile}
CONTROLLER_GEN_VERSION=${CONTROLLER_GEN_VERSION:?set by the Makefile}
mkdir -p "$bin"

build() { # name, module dir, package, [ldflags]
  local name=$1 dir=$2 pkg=$3 ldflags=${4:-}
  [ -x "$bin/$name" ] && return 0
  echo "building $name ($pkg)"
  (cd "$root/$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg") && mv "$bin/$name.tmp" "$bin/$name"
}
# Kubernetes' own builds stamp the version; without it kube-apiserver reports
# v0.0.0-master, which a chart's kubeVersion constraint (and kubectl's skew
# check) refuses. The version is the one hack/kube/go.mod pins.
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2 }' "$root/hack/kube/go.mod")
kube_minor=${kube_version#v*.}; kube_minor=${kube_minor%%.*}
kube_major=${kube_version#v}; kube_major=${kube_major%%.*}
kube_ldflags="-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=$kube_major -X k8s.io/component-base/version.gitMinor=$kube_minor -X k8s.io/component-base/version.gitTreeState=clean"
# A bin/ built before the stamp (or at another pin) is rebuilt, once.
if [ -x "$bin/kube-apiserver" ] && ! "$bin/kube-apiserver" --version | grep -qx "Kubernetes $kube_version"; then
  rm -f "$bin/kube-apiserver" "$bin/kube-controller-manager" "$bin/kube-scheduler" "$bin/kubectl"
fi
install_tool() { # name, package@version
  local name=$1 pkg=$2
  [ -x "$bin/$name" ] && return 0
  echo "installing $pkg"
  GOBIN="$bin" go install "$pkg"
}

# OpenKruise's manager is for make bench-compare only: `hack/test-assets.sh
# kruise-manager` builds it alone (pinned in hack/kruise/go.mod; OpenKruise is
# not in the checksum database, so its hash is pinned in hack/kruise/go.sum).
if [ "${1:-}" = kruise-manager ]; then
  GONOSUMDB=github.com/openkruise build kruise-manager hack/kruise github.com/openkruise/kruise
  exit 0
fi

install_tool controller-gen "sigs.k8s.io/controller-tools/cmd/controller-gen@$CONTROLLER_GEN_VERSION"
build etcd hack/etcd .
build kube-apiserver hack/kube k8s.io/kubernetes/cmd/kube-apiserver "$kube_ldflags"
install_tool kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
install_tool kwokctl "sigs.k8s.io/kwok/cmd/kwokctl@$KWOK_VERSION"
build kube-controller-manager hack/kube k8s.io/kubernetes/cmd/kube-controller-manager "$kube_ldflags"
build kube-scheduler hack/kube k8s.io/kubernetes/cmd/kube-scheduler "$kube_ldflags"
# kubectl and helm for make test-docs, which runs the docs' commands as a user
# would: kubectl at the control plane's version (hack/kube/go.mod), Helm as
# pinned in hack/helm/go.mod.
build kubectl hack/kube k8s.io/kubernetes/cmd/kubectl "$kube_ldflags"
build helm hack/helm helm.sh/helm/v4/cmd/helm
