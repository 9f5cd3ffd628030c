#!/usr/bin/env bash
# The Kubernetes control plane the Kubernetes controller's tests run against (docs/controllers.md,
# docs/notes/kubernetes-test-control-plane.md): kube-apiserver and kube-controller-manager of Kubernetes
# $K8S_VERSION and etcd, built from their Go modules by tools/k8s (its go.mod replaces every k8s.io staging
# module by its published release, which is what makes k8s.io/kubernetes/cmd/... buildable; go.sum pins all).
#
# The binaries are cached OUTSIDE the checkout (a clean clone must not rebuild them: 7-8 minutes of two cores),
# in $KIP848_K8S_CACHE (default ~/.cache/kip848/k8s), under the version, with a stamp of tools/k8s/go.sum:
# a second run prints "cached" and returns at once. Two runs at once build once (a lock).
#
# Go: the machine's when it is $GO_VERSION_MIN or newer, else Go $GO_VERSION fetched from the Go module proxy
# (golang.org/toolchain, the same archive `GOTOOLCHAIN` downloads) into the cache.
set -euo pipefail

K8S_VERSION=v1.37.2
GO_VERSION=1.26.8
GO_VERSION_MIN=1.26
here=$(cd "$(dirname "$0")/.." && pwd)
module="$here/tools/k8s"
cache="${KIP848_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kip848/k8s}"
out="$cache/$K8S_VERSION"
bin="$out/bin"
binaries=(etcd kube-apiserver kube-controller-manager)
want="kubernetes $K8S_VERSION, tools/k8s/go.sum $(sha256sum "$module/go.sum" | cut -c1-16)"

built() {
  [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$want" ] || return 1
  for b in "${binaries[@]}"; do [ -x "$bin/$b" ] || return 1; done
}

mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if built; then
  echo "k8s control plane: cached in $bin ($want)"
  exit 0
fi

# -- a Go toolchain --------------------------------------------------------------------------------------------
go_ok() {  # $1: a go command; true when its version is at least GO_VERSION_MIN
  local v
  v=$("$1" env GOVERSION 2>/dev/null) || return 1
  v=${v#go}
  [ "$(printf '%s\n%s\n' "$GO_VERSION_MIN" "$v" | sort -V | head -1)" = "$GO_VERSION_MIN" ]
}
go_cmd=$(command -v go || true)
if [ -z "$go_cmd" ] || ! go_ok "$go_cmd"; then
  arch=$(uname -m); case "$arch" in x86_64) arch=amd64;; aarch64) arch=arm64;; esac
  goroot="$cache/go$GO_VERSION"
  if [ ! -x "$goroot/bin/go" ]; then
    echo "k8s control plane: fetching Go $GO_VERSION from the Go module proxy (no Go >= $GO_VERSION_MIN here)"
    url="https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go$GO_VERSION.linux-$arch.zip"
    curl -fsSL --retry 3 -o "$cache/go.zip" "$url"
    rm -rf "$goroot.tmp" && mkdir -p "$goroot.tmp"
    # the archive's files sit under golang.org/toolchain@v0.0.1-go.../; keep their modes (python's zipfile drops them)
    python3 - "$cache/go.zip" "$goroot.tmp" <<'PY'
import os, sys, zipfile
archive, dest = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(archive) as z:
    for info in z.infolist():
        name = info.filename.split("/", 1)[1] if "/" in info.filename else ""
        if not name or name.endswith("/"):
            continue
        path = os.path.join(dest, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as dst:
            dst.write(src.read())
        mode = (info.external_attr >> 16) & 0o777
        os.chmod(path, mode or 0o644)
PY
    rm -f "$cache/go.zip"
    rm -rf "$goroot" && mv "$goroot.tmp" "$goroot"
  fi
  go_cmd="$goroot/bin/go"
fi

# -- the build ---------------------------------------------------------------------------------------------------
echo "k8s control plane: building Kubernetes $K8S_VERSION (kube-apiserver, kube-controller-manager) and etcd" \
     "with $("$go_cmd" version | cut -d' ' -f3) into $bin (first time only: several minutes)"
start=$(date +%s)
export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-mod=readonly
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1"
ldflags="$ldflags -X k8s.io/component-base/version.gitMinor=$minor"
rm -rf "$bin.tmp" && mkdir -p "$bin.tmp"
cd "$module"
"$go_cmd" build -trimpath -ldflags "$ldflags" -o "$bin.tmp/" \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
"$go_cmd" build -trimpath -ldflags "-s -w" -o "$bin.tmp/etcd" go.etcd.io/etcd/server/v3
rm -rf "$bin" && mv "$bin.tmp" "$bin"
echo "$want" > "$out/stamp"
echo "k8s control plane: built in $(( $(date +%s) - start )) s: $(cd "$bin" && "./kube-apiserver" --version), etcd" \
     "$("$bin/etcd" --version | head -1 | awk '{print $3}')"
