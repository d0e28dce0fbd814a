#!/usr/bin/env bash
# Build (or reuse) the real kube-apiserver that karpweb's Kubernetes tests run against,
# and make sure etcd is installed.
#
# - etcd: Debian's `etcd-server` package (3.4.x), installed with apt-get if missing.
# - kube-apiserver v1.20.2: built from Debian's own `kubernetes` source package with Debian's
#   Go 1.19 (`golang-1.19-go`), because no prebuilt kube-apiserver is reachable from these
#   machines. The binary is cached OUTSIDE the repository and reused on the next run:
#       ${KARPWEB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpweb}/kube-apiserver-v1.20.2-<recipe>
#   A cold build takes about 3 minutes on 2 cores and needs ~2.2 GB of temporary space (removed
#   afterwards); a cached run takes well under a second.
#
# The source is fetched with a PRIVATE apt source list (deb-src copy of the machine's Debian
# sources, its own lists directory); the system's apt configuration is never modified.
#
# Four fixes are applied to the source tree (see docs/kubernetes.md):
#   1. build in GOPATH mode (GO111MODULE=off, tree at $GOPATH/src/k8s.io/kubernetes);
#   2. generate the missing pkg/generated/openapi/zz_generated.openapi.go with the vendored
#      openapi-gen over every package tagged `+k8s:openapi-gen=`;
#   3. replace the vendored github.com/modern-go/reflect2 1.0.1 (crashes under Go >= 1.18 on the
#      first custom-resource create) with Debian's golang-github-modern-go-reflect2-dev 1.0.2;
#   4. the vendored OpenAPI type validator (kube-openapi's and go-openapi's validate/type.go) tests
#      for "null" with reflect.DeepEqual(reflect.Zero(T), reflect.ValueOf(v)); since Go 1.19 an
#      empty string and reflect.Zero(string) share runtime.zeroVal, so every "" in a custom resource
#      (a condition's message, say) was rejected as null. Check for nil only, which is what the
#      test did under the Go 1.15 Kubernetes 1.20 was released with.
# RECIPE names this recipe in the binary's file name, so a binary built by an older recipe is rebuilt.
#
# Usage: scripts/kube-apiserver.sh            build or reuse; prints the paths it provides
#        scripts/kube-apiserver.sh --print-path   only print the binary's path (no work)
# Exit status is non-zero on any failure.
set -euo pipefail

VERSION=v1.20.2
RECIPE=r2
KUBE_SOURCE_PACKAGE=kubernetes
CACHE_DIR=${KARPWEB_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/karpweb}
BIN=$CACHE_DIR/kube-apiserver-$VERSION-$RECIPE
GO=/usr/lib/go-1.19/bin/go
REFLECT2_DEBIAN=/usr/share/gocode/src/github.com/modern-go/reflect2

say() { printf '[kube-apiserver.sh] %s\n' "$*"; }
die() { printf '[kube-apiserver.sh] ERROR: %s\n' "$*" >&2; exit 1; }

if [[ ${1:-} == --print-path ]]; then
    echo "$BIN"
    exit 0
fi
[[ $# -eq 0 ]] || die "unknown argument: $1 (usage: $0 [--print-path])"

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

ensure_packages() {
    local missing=() pkg
    for pkg in "$@"; do
        installed "$pkg" || missing+=("$pkg")
    done
    [[ ${#missing[@]} -eq 0 ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "need the Debian packages ${missing[*]}; run as root or: sudo apt-get install -y ${missing[*]}"
    say "installing Debian packages: ${missing[*]}"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"; then
        say "apt-get install failed; refreshing the package lists once and retrying"
        apt-get update
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}" \
            || die "apt-get install ${missing[*]} failed"
    fi
}

binary_ok() {
    [[ -x $BIN ]] && "$BIN" --version 2>/dev/null | grep -qx "Kubernetes $VERSION"
}

mkdir -p "$CACHE_DIR"
# One build at a time, even when CI and a developer run this together.
exec 9>"$CACHE_DIR/.kube-apiserver.lock"
flock 9

ensure_packages etcd-server
command -v etcd >/dev/null || die "etcd-server is installed but etcd is not on PATH"

if binary_ok; then
    say "cached: $BIN ($("$BIN" --version))"
    say "etcd: $(command -v etcd) ($(etcd --version | head -n1))"
    exit 0
fi

say "no usable $BIN; building kube-apiserver $VERSION from Debian's '$KUBE_SOURCE_PACKAGE' source package"
ensure_packages golang-1.19-go golang-github-modern-go-reflect2-dev ca-certificates
[[ -x $GO ]] || die "$GO missing after installing golang-1.19-go"
[[ -d $REFLECT2_DEBIAN ]] || die "$REFLECT2_DEBIAN missing after installing golang-github-modern-go-reflect2-dev"

free_kb=$(df -Pk "$CACHE_DIR" | awk 'NR==2 {print $4}')
(( free_kb > 3 * 1024 * 1024 )) || die "need ~3 GB free under $CACHE_DIR for the build, have $((free_kb / 1024)) MB"

# --- 1. the source, through a private apt source list -------------------------------------
APT_DIR=$CACHE_DIR/apt
SRC_DIR=$CACHE_DIR/src
mkdir -p "$APT_DIR/lists/partial" "$SRC_DIR"
SYSTEM_SOURCES=/etc/apt/sources.list.d/debian.sources
[[ -f $SYSTEM_SOURCES ]] || die "$SYSTEM_SOURCES not found; cannot derive a deb-src list"
sed -E 's/^Types:[[:space:]]*deb[[:space:]]*$/Types: deb-src/' "$SYSTEM_SOURCES" > "$APT_DIR/debian-src.sources"
APT_OPTS=(
    -o "Dir::Etc::SourceList=$APT_DIR/debian-src.sources"
    -o "Dir::Etc::SourceParts=/dev/null"
    -o "Dir::State::Lists=$APT_DIR/lists"
    -o "APT::Sandbox::User=root"
)
shopt -s nullglob
orig=("$SRC_DIR"/${KUBE_SOURCE_PACKAGE}_*.orig.tar.*)
if [[ ${#orig[@]} -eq 0 ]]; then
    say "fetching the deb-src index into $APT_DIR (private list; system apt config untouched)"
    apt-get "${APT_OPTS[@]}" update
    say "downloading the '$KUBE_SOURCE_PACKAGE' source package into $SRC_DIR"
    (cd "$SRC_DIR" && apt-get "${APT_OPTS[@]}" source --download-only "$KUBE_SOURCE_PACKAGE")
    orig=("$SRC_DIR"/${KUBE_SOURCE_PACKAGE}_*.orig.tar.*)
fi
[[ ${#orig[@]} -eq 1 ]] || die "expected one ${KUBE_SOURCE_PACKAGE}_*.orig.tar.* in $SRC_DIR, found ${#orig[@]}"
say "source: ${orig[0]}"
[[ ${orig[0]##*/} == *"${VERSION#v}.orig.tar."* ]] \
    || die "Debian's source is ${orig[0]##*/}, not Kubernetes $VERSION; this recipe and its fixes are for $VERSION"

# --- 2. a GOPATH tree (fix 1) ---------------------------------------------------------------
WORK=$CACHE_DIR/build-kube-apiserver
rm -rf "$WORK"
trap 'rm -rf "$WORK"' EXIT
export GOPATH=$WORK/gopath GOCACHE=$WORK/gocache GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOTOOLCHAIN=local
export PATH=/usr/lib/go-1.19/bin:$PATH
TREE=$GOPATH/src/k8s.io/kubernetes
mkdir -p "$TREE"
say "unpacking into $TREE"
tar -xf "${orig[0]}" -C "$TREE" --strip-components=1
[[ -f $TREE/cmd/kube-apiserver/apiserver.go ]] || die "unexpected source layout: no cmd/kube-apiserver in ${orig[0]}"

# --- 3. reflect2 1.0.2 from Debian (fix 3) --------------------------------------------------
say "replacing vendored github.com/modern-go/reflect2 with Debian's 1.0.2"
rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
mkdir -p "$TREE/vendor/github.com/modern-go/reflect2"
cp -a "$REFLECT2_DEBIAN/." "$TREE/vendor/github.com/modern-go/reflect2/"
find "$TREE/vendor/github.com/modern-go/reflect2" -name '*_test.go' -delete

# --- 4. the OpenAPI "null" check under Go >= 1.19 (fix 4) -----------------------------------
ZERO_CHECK='data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data))'
mapfile -t type_validators < <(grep -rlF --include=type.go "$ZERO_CHECK" "$TREE/vendor/" "$TREE/staging/src/" || true)
[[ ${#type_validators[@]} -ge 1 ]] || die "did not find the OpenAPI type validator's zero-value check to fix"
for f in "${type_validators[@]}"; do
    say "fixing the empty-string-is-null check in ${f#"$TREE"/}"
    sed -i "s/if $ZERO_CHECK {/if data == nil {/" "$f"
    ! grep -qF "$ZERO_CHECK" "$f" || die "could not patch $f"
done

cd "$TREE"

# --- 5. generated OpenAPI definitions (fix 2) -----------------------------------------------
say "building the vendored openapi-gen"
nice -n 10 "$GO" build -o "$WORK/bin/openapi-gen" ./vendor/k8s.io/kube-openapi/cmd/openapi-gen

# The packages Kubernetes' Makefile.generated_files feeds to openapi-gen: directories (staging
# named as vendor/...) holding a Go file with a `// +k8s:` tag, whose tags include openapi-gen=.
tag_dirs() {
    find -H . \( -path './_*' -o -path './.*' -o -path ./vendor \) -prune -o -type f -name '*.go' -print \
        | sed 's|^\./staging/src|vendor|; s|^\./||' \
        | xargs grep -l --color=never '^// *+k8s:' \
        | xargs grep -l --color=never '+k8s:openapi-gen=' \
        | xargs -n1 dirname | LC_ALL=C sort -u
}
mapfile -t all_dirs < <(tag_dirs)
[[ ${#all_dirs[@]} -gt 50 ]] || die "found only ${#all_dirs[@]} packages tagged +k8s:openapi-gen="

generate_openapi() { # <output package dir> <dirs...>
    local out=$1; shift
    local inputs
    inputs=$(printf 'k8s.io/kubernetes/%s,' "$@")
    "$WORK/bin/openapi-gen" --logtostderr -v 0 \
        -i "${inputs%,}" \
        -p "k8s.io/kubernetes/$out" \
        -O zz_generated.openapi \
        -h vendor/k8s.io/code-generator/hack/boilerplate.go.txt \
        -r "$WORK/openapi-violations.report"
    [[ -s $out/zz_generated.openapi.go ]] || die "openapi-gen produced no $out/zz_generated.openapi.go"
}

if [[ ! -f pkg/generated/openapi/zz_generated.openapi.go ]]; then
    kube_dirs=()
    for d in "${all_dirs[@]}"; do
        case $d in vendor/k8s.io/code-generator/* | vendor/k8s.io/sample-apiserver/*) ;; *) kube_dirs+=("$d") ;; esac
    done
    say "generating pkg/generated/openapi/zz_generated.openapi.go from ${#kube_dirs[@]} packages"
    generate_openapi pkg/generated/openapi "${kube_dirs[@]}"
fi
for f in staging/src/k8s.io/kube-aggregator/pkg/generated/openapi/zz_generated.openapi.go \
         staging/src/k8s.io/apiextensions-apiserver/pkg/generated/openapi/zz_generated.openapi.go; do
    [[ -f $f ]] || die "$f is missing from the source tarball too; this script only regenerates pkg/generated/openapi"
done

# --- 6. the binary ----------------------------------------------------------------------------
LDFLAGS="-s -w"
for pkg in k8s.io/kubernetes/vendor/k8s.io/component-base/version k8s.io/kubernetes/vendor/k8s.io/client-go/pkg/version; do
    LDFLAGS+=" -X '$pkg.gitVersion=$VERSION' -X '$pkg.gitMajor=1' -X '$pkg.gitMinor=20'"
    LDFLAGS+=" -X '$pkg.gitTreeState=clean' -X '$pkg.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)'"
done
say "building cmd/kube-apiserver (GOPATH mode, Go $("$GO" env GOVERSION), ~3 min on 2 cores)"
start=$SECONDS
nice -n 10 "$GO" build -o "$BIN.tmp" -ldflags "$LDFLAGS" ./cmd/kube-apiserver
mv -f "$BIN.tmp" "$BIN"
say "built in $((SECONDS - start)) s: $BIN"

binary_ok || die "$BIN does not report 'Kubernetes $VERSION': $("$BIN" --version 2>&1 || true)"
cd /
say "removing the build tree $WORK"
say "ready: $BIN ($("$BIN" --version))"
say "etcd: $(command -v etcd) ($(etcd --version | head -n1))"
