#!/usr/bin/env bash
# Builds the real components `make conformance` runs, with CGO_ENABLED=0, from the Go modules here:
#   kube/       kube-apiserver, kube-scheduler, etcd, scheduler-oracle   (k8s.io/kubernetes, pinned)
#               and dra-oracle (its DynamicResources plugin over DRA objects), cel-cost (the API server's
#               cost estimate of DRA selectors)
#   kwok/       kwok                                                      (sigs.k8s.io/kwok, pinned)
#   karpenter/  karpenter-oracle, Karpenter's kwok provider               (sigs.k8s.io/karpenter, pinned)
#               and karpenter-oracle-stable (Solve's claim sort made stable: the burst differential)
#   migparted/  mig-configs, mig-parted's config parser (github.com/NVIDIA/mig-parted, pinned; CGO_ENABLED=1:
#               its go-nvml dependency is cgo only, and mig-configs never loads NVML)
#   containerd/v21, v23, v24/  containerd 2.1.4, 2.3.4, 2.4.2 (github.com/containerd/containerd/v2, pinned; one
#               module per release: Go builds one version of a module per module), for `config dump`
#   kueue/      minimalkueue, Kueue's minimal manager for its scheduler performance tests (sigs.k8s.io/kueue,
#               pinned; the tests read Kueue's CRDs from the module: `go list -m sigs.k8s.io/kueue`)
# Output: $KGPU_CONFORMANCE_CACHE/<key>/bin/<module>/<binary>, where <key> hashes versions.env and every
# module's go.mod, go.sum and Go sources; an up-to-date build is reused. Prints the bin directory last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${KGPU_CONFORMANCE_CACHE:-$here/../.cache/conformance}
command -v go >/dev/null || { echo "conformance: Go is required (https://go.dev/dl/); make test does not need it" >&2; exit 2; }
"$here/gen-gomod.sh" --check >&2

modules=()
for m in kube kwok karpenter migparted containerd/v21 containerd/v23 containerd/v24 kueue; do [ -f "$here/$m/go.mod" ] && modules+=("$m"); done
key=$( (cd "$here" && cat versions.env build.sh && for m in "${modules[@]}"; do
          find "$m" -type f \( -name go.mod -o -name go.sum -o -name '*.go' \) | LC_ALL=C sort | xargs sha256sum; done
        go env GOVERSION) | sha256sum | cut -c1-16)
out="$cache/$key"
if [ -f "$out/.complete" ]; then
  echo "conformance: binaries up to date ($out/bin)" >&2
  echo "$out/bin"; exit 0
fi
mkdir -p "$out/bin"
export CGO_ENABLED=0
start=$(date +%s)
for i in "${!modules[@]}"; do
  m=${modules[$i]}
  t0=$(date +%s)
  targets=()
  [ -d "$here/$m/cmd" ] && targets+=(./cmd/...)
  grep -q '^tool' "$here/$m/go.mod" && targets+=(tool)
  echo "conformance: [$((i + 1))/${#modules[@]}] building $m (all cold: about 19 minutes on 2 cores; later builds reuse Go's cache)" >&2
  cgo=0; [ "$m" = migparted ] && cgo=1
  (cd "$here/$m" && CGO_ENABLED=$cgo go build -trimpath -o "$out/bin/$m/" "${targets[@]}") >&2
  echo "conformance: [$((i + 1))/${#modules[@]}] $m built in $(( $(date +%s) - t0 ))s: $(ls "$out/bin/$m" | tr '\n' ' ')" >&2
done
if [ -f "$here/karpenter/go.mod" ]; then
  # karpenter-oracle-stable: the same oracle with one change to Karpenter's Solve: its in-flight claims sorted
  # by pod count with sort.SliceStable instead of sort.Slice (pdqsort above 12 claims, whose order among
  # claims with as many pods kgpu does not follow); the burst differential shows that this order is all that
  # tells kgpu's launch from Solve's. Built from a vendored copy of the pinned module, the one line patched.
  t0=$(date +%s)
  tmp=$(mktemp -d)
  cp -r "$here/karpenter/." "$tmp/"
  (cd "$tmp" && GOFLAGS=-mod=mod go mod vendor &&
    f=vendor/sigs.k8s.io/karpenter/pkg/controllers/provisioning/scheduling/scheduler.go &&
    [ "$(grep -c 'sort.Slice(s.newNodeClaims,' "$f")" = 1 ] &&
    sed -i 's/sort.Slice(s.newNodeClaims,/sort.SliceStable(s.newNodeClaims,/' "$f" &&
    go build -mod=vendor -trimpath -o "$out/bin/karpenter/karpenter-oracle-stable" ./cmd/karpenter-oracle) >&2 ||
    { echo "conformance: could not build karpenter-oracle-stable (did Karpenter's Solve change?)" >&2; rm -rf "$tmp"; exit 1; }
  rm -rf "$tmp"
  echo "conformance: karpenter-oracle-stable built in $(( $(date +%s) - t0 ))s" >&2
fi
touch "$out/.complete"
echo "conformance: all built in $(( $(date +%s) - start ))s" >&2
echo "$out/bin"
