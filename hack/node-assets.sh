#!/usr/bin/env bash
# Builds the pinned binaries of the real-node test bed (test/realnode) into
# bin/, skipping any that already exist: the kubelet (k8s.io/kubernetes
# v1.37.2 through hack/kubelet/go.mod), containerd v2 with its runc shim and
# ctr, crictl, the CNI plugins the node's bridge network needs (bin/cni/),
# and Traefik v3.6.12, the Gateway API data plane of the traffic test
# (hack/traefik/go.mod). runc itself comes from Debian (.ci/run installs it).
# `hack/node-assets.sh traefik` builds Traefik alone (make traefik).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
CONTAINERD_VERSION=${CONTAINERD_VERSION:?set by the Makefile}
CRI_TOOLS_VERSION=${CRI_TOOLS_VERSION:?set by the Makefile}
CNI_PLUGINS_VERSION=${CNI_PLUGINS_VERSION:?set by the Makefile}
mkdir -p "$bin/cni"

timed() { # name, command...: runs the command and prints how long it took
  local name=$1 start
  shift
  start=$(date +%s)
  "$@"
  echo "built $name in $(($(date +%s) - start))s"
}
build() { # name, module dir, package, go build flags...
  local name=$1 dir=$2 pkg=$3
  shift 3
  [ -x "$bin/$name" ] && return 0
  echo "building $name ($pkg)"
  (cd "$root/$dir" && timed "$name" go build -trimpath "$@" -o "$bin/$name.tmp" "$pkg") && mv "$bin/$name.tmp" "$bin/$name"
}
traefik() { # Traefik says which version it is (its release build sets it the same way).
  local version
  version=$(cd "$root/hack/traefik" && go list -m -f '{{.Version}}' github.com/traefik/traefik/v3)
  build traefik hack/traefik github.com/traefik/traefik/v3/cmd/traefik \
    -ldflags "-X github.com/traefik/traefik/v3/pkg/version.Version=$version"
}
install_tool() { # dir under bin, name, package@version
  local dir=$1 name=$2 pkg=$3 tmp
  [ -x "$dir/$name" ] && return 0
  echo "installing $pkg"
  # Through a temporary GOBIN, so that an interrupted install never leaves a
  # half-written binary that the next run would take as present.
  tmp=$(mktemp -d "$dir/.install.XXXXXX")
  timed "$name" env GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath "$pkg"
  mv "$tmp/$name" "$dir/$name"
  rm -rf "$tmp"
}

if [ "${1:-}" = traefik ]; then
  traefik
  exit 0
fi

install_tool "$bin" containerd "github.com/containerd/containerd/v2/cmd/containerd@$CONTAINERD_VERSION"
install_tool "$bin" containerd-shim-runc-v2 "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION"
install_tool "$bin" ctr "github.com/containerd/containerd/v2/cmd/ctr@$CONTAINERD_VERSION"
install_tool "$bin" crictl "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION"
for plugin in bridge host-local loopback portmap; do
  case $plugin in
  bridge | loopback) kind=main ;;
  host-local) kind=ipam ;;
  portmap) kind=meta ;;
  esac
  install_tool "$bin/cni" "$plugin" "github.com/containernetworking/plugins/plugins/$kind/$plugin@$CNI_PLUGINS_VERSION"
done
build kubelet hack/kubelet k8s.io/kubernetes/cmd/kubelet
traefik
