#!/usr/bin/env bash
# Builds real Flux (source-controller, kustomize-controller) and real Argo CD
# (one multi-call binary) from the Go module proxy into bin/, and copies their
# CRDs into bin/gitops-crds/, skipping whatever already exists. Used by
# `make test-gitops` (test/gitops). Versions are pinned in hack/gitops/versions.
#
# The modules cannot be built through a wrapper go.mod as they ship: each Flux
# controller's go.mod has `replace github.com/fluxcd/<name>/api => ./api`, a
# folder that is its own module and is absent from the downloaded files, and
# Argo CD's go.mod replaces the k8s.io staging modules. So each module's files
# are copied out of the module cache into a scratch directory, the local api
# replace is swapped for the proxy's api module at the same version, and the
# main package is built there (see ../../docs and /work/shared/design/testing.md
# "GitOps controllers from the module proxy" for why these versions).
#
#   hack/gitops-assets.sh            all of them
#   hack/gitops-assets.sh argocd     one (source-controller | kustomize-controller | argocd | crds)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
# shellcheck source=gitops/versions
. "$root/hack/gitops/versions"
mkdir -p "$bin"
export GOFLAGS=-mod=mod

moddir() { # module@version -> its directory in the module cache (downloads it)
  go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

scratch() { # module@version -> a writable copy of its files
  local src dst
  src=$(moddir "$1")
  dst=$(mktemp -d -t stepwise-gitops-build.XXXXXX)
  cp -r "$src/." "$dst/"
  chmod -R u+w "$dst"
  echo "$dst"
}

flux() { # name (source-controller | kustomize-controller), extra go mod edit flags...
  local name=$1; shift
  [ -x "$bin/$name" ] && return 0
  echo "building $name $FLUX_VERSION (github.com/fluxcd/$name)"
  local start dir
  start=$(date +%s)
  dir=$(scratch "github.com/fluxcd/$name@$FLUX_VERSION")
  (
    cd "$dir"
    go mod edit -dropreplace "github.com/fluxcd/$name/api" \
      -require "github.com/fluxcd/$name/api@$FLUX_VERSION" "$@"
    # No tidy: it would also resolve the tests' dependencies, some of which the proxy refuses.
    go build -trimpath -o "$bin/$name.tmp" .
  )
  mv "$bin/$name.tmp" "$bin/$name"
  rm -rf "$dir"
  echo "built $name in $(($(date +%s) - start)) s"
}

argocd() {
  if [ ! -x "$bin/argocd" ]; then
    echo "building argocd $ARGOCD_VERSION (github.com/argoproj/argo-cd/v3/cmd)"
    local start dir
    start=$(date +%s)
    dir=$(scratch "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION")
    (cd "$dir" && go build -trimpath -o "$bin/argocd.tmp" ./cmd)
    mv "$bin/argocd.tmp" "$bin/argocd"
    rm -rf "$dir"
    echo "built argocd in $(($(date +%s) - start)) s"
  fi
  # The binary acts by the name it is called with.
  local n
  for n in argocd-application-controller argocd-repo-server; do
    [ -e "$bin/$n" ] || ln -s argocd "$bin/$n"
  done
}

crds() {
  local out="$bin/gitops-crds" d f
  [ -f "$out/.complete-$FLUX_VERSION-$ARGOCD_VERSION" ] && return 0
  mkdir -p "$out"
  for n in source-controller kustomize-controller; do
    d=$(moddir "github.com/fluxcd/$n@$FLUX_VERSION")
    for f in "$d"/config/crd/bases/*.yaml; do cp "$f" "$out/flux-$(basename "$f")"; done
  done
  d=$(moddir "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION")
  for f in "$d"/manifests/crds/*-crd.yaml; do cp "$f" "$out/argocd-$(basename "$f")"; done
  chmod u+w "$out"/*.yaml
  touch "$out/.complete-$FLUX_VERSION-$ARGOCD_VERSION"
}

case "${1:-all}" in
  source-controller)
    # v1.9.6 wants fluxcd/pkg/artifact v0.18.3, which the proxy refuses; v0.18.1 is served and builds.
    flux source-controller -replace "github.com/fluxcd/pkg/artifact=github.com/fluxcd/pkg/artifact@$FLUX_PKG_ARTIFACT_VERSION" ;;
  kustomize-controller) flux kustomize-controller ;;
  argocd) argocd ;;
  crds) crds ;;
  all)
    crds
    "$0" source-controller
    "$0" kustomize-controller
    argocd ;;
  *) echo "usage: $0 [source-controller|kustomize-controller|argocd|crds]" >&2; exit 2 ;;
esac
