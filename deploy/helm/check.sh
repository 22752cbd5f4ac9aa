#!/usr/bin/env bash
# Checks the Helm chart deploy/helm/eim:
#   1. helm lint, with the default values and every ci/*-values.yaml;
#   2. helm template for every layout × profile, and for the variants of
#      ci/ (external DSN, bundled PostgreSQL, SQLite, operator secrets,
#      Ingresses), with a few assertions on what they render (the flags of
#      the module contract, one Deployment per module…);
#   3. bad values fail with a message naming what is wrong;
#   4. a real Kubernetes API server (kube-apiserver built from source in
#      .ci/kube, on Debian's etcd, both on loopback) accepts every rendered
#      object: kubectl apply --dry-run=server, strict field validation;
#   5. the keys and certificates the chart generates work in the real
#      server: eim server starts with them, and a token minted from the
#      rendered signing key is accepted.
# Installs what it needs (apt: etcd-server, kubectl from kubernetes-client
# when none is on PATH; go install: helm) and caches the built tools in
# $EIM_CI_CACHE (default ~/.cache/eim-ci). Measured 2026-11-26 on the 2-core
# machine: warm 31 s; cold (empty tool and Go build caches) 26 min on a machine
# busy with other work (load 9-15), 11 min of CPU, nearly all of it building
# kube-apiserver and helm.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
chart=deploy/helm/eim
HELM_VERSION=v3.22.0
# The Kubernetes version .ci/kube builds; the chart is rendered for it (a helm
# built with go install does not know a default) and the API server reports it.
KUBE_VERSION=$(awk '$1 == "k8s.io/kubernetes" && $2 ~ /^v/ { print $2; exit }' .ci/kube/go.mod)
cache=${EIM_CI_CACHE:-$HOME/.cache/eim-ci}
mkdir -p "$cache/bin"
export PATH="$cache/bin:$PATH:/usr/local/go/bin"

step() { printf -- '-- %s\n' "$*"; }
die() { echo "check: $*" >&2; exit 1; }
[ -n "$KUBE_VERSION" ] || die "no k8s.io/kubernetes version in .ci/kube/go.mod"
started=$(date +%s)

# --- tools ---------------------------------------------------------------
sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
pkgs=""
command -v etcd >/dev/null 2>&1 || pkgs="$pkgs etcd-server"
command -v kubectl >/dev/null 2>&1 || pkgs="$pkgs kubernetes-client"
command -v openssl >/dev/null 2>&1 || pkgs="$pkgs openssl"
if [ -n "$pkgs" ]; then
	step "installing:$pkgs"
	$sudo apt-get update -qq
	# etcd-server's post-install may fail to start a service in a sandbox;
	# the binary is installed all the same.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null || true
	for b in etcd kubectl openssl; do command -v $b >/dev/null 2>&1 || die "$b not installed"; done
fi

have=$(go version -m "$cache/bin/helm" 2>/dev/null | awk '$1 == "mod" { print $3; exit }') || true
if [ "$have" != "$HELM_VERSION" ]; then
	step "building helm $HELM_VERSION"
	(cd /tmp && GOBIN="$cache/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION")
fi

# kube-apiserver: cached under the hash of the module that pins it.
# Without the version stamped in, it would report v0.0.0 (and helm install
# would refuse the chart's kubeVersion).
minor=$(echo "$KUBE_VERSION" | cut -d. -f2)
ldflags="-X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
kube_key=$( (cat .ci/kube/go.mod .ci/kube/go.sum; echo "$ldflags") | sha256sum | cut -c1-16)
apiserver="$cache/kube-apiserver-$kube_key"
if [ ! -x "$apiserver" ]; then
	step "building kube-apiserver $KUBE_VERSION (several minutes, once)"
	(cd .ci/kube && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "$ldflags" -o "$apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
	mv "$apiserver.tmp" "$apiserver"
fi

work=$(mktemp -d)
etcd_pid=; api_pid=; eim_pid=
cleanup() {
	set +e
	for p in $eim_pid $api_pid $etcd_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	rm -rf "$work"
}
trap cleanup EXIT

# --- start etcd and the API server in the background while rendering ------
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
	echo $((20000 + RANDOM % 20000)); }
etcd_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
mkdir -p "$work/etcd" "$work/kube"
etcd --data-dir "$work/etcd" --name ci \
	--listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
	--listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
	--initial-cluster "ci=http://127.0.0.1:$peer_port" >"$work/etcd.log" 2>&1 &
etcd_pid=$!
openssl genrsa -out "$work/kube/sa.key" 2048 2>/dev/null
openssl rsa -in "$work/kube/sa.key" -pubout -out "$work/kube/sa.pub" 2>/dev/null
token=$(openssl rand -hex 16)
echo "$token,ci-admin,ci-admin,system:masters" >"$work/kube/tokens.csv"
"$apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
	--service-account-issuer=https://kubernetes.default.svc \
	--service-account-key-file="$work/kube/sa.pub" --service-account-signing-key-file="$work/kube/sa.key" \
	--token-auth-file="$work/kube/tokens.csv" --authorization-mode=RBAC \
	--secure-port="$api_port" --cert-dir="$work/kube/certs" \
	--advertise-address=127.0.0.1 --bind-address=127.0.0.1 --endpoint-reconciler-type=none \
	--service-cluster-ip-range=10.96.0.0/24 >"$work/apiserver.log" 2>&1 &
api_pid=$!
export KUBECONFIG="$work/kubeconfig"
cat >"$KUBECONFIG" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: ci, cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}}]
users: [{name: ci, user: {token: "$token"}}]
contexts: [{name: ci, context: {cluster: ci, user: ci}}]
current-context: ci
EOF

# --- lint and render -----------------------------------------------------
ns=eim-ci
step "helm lint"
helm lint --strict "$chart" >"$work/lint.log" || { cat "$work/lint.log"; die "helm lint failed"; }
for v in "$chart"/ci/*-values.yaml; do
	helm lint --strict "$chart" -f "$v" >"$work/lint.log" || { cat "$work/lint.log"; die "helm lint -f $v failed"; }
done

render() { # name, helm template args…
	local name=$1; shift
	helm template eim "$chart" --namespace "$ns" --kube-version "$KUBE_VERSION" "$@" >"$work/render-$name.yaml" ||
		die "helm template $name ($*) failed"
}
step "helm template: every layout and profile, and the ci/ variants"
layouts="single profile modules"
profiles="full provisioning observability day2 oob"
n=0
for l in $layouts; do
	for p in $profiles; do
		extra=()
		[ "$l" = modules ] && extra=(--set agent.ingress.enabled=true --set agent.ingress.host=agents.example.com)
		render "$l-$p" --set layout="$l" --set profile="$p" "${extra[@]}"
		n=$((n + 1))
	done
done
for v in "$chart"/ci/*-values.yaml; do
	render "ci-$(basename "$v" -values.yaml)" -f "$v"
	n=$((n + 1))
done
render explicit-modules --set 'modules={api,host}' --set replicas=3
render external-profile --set database.mode=external --set database.external.existingSecret=pg --set size=1k
n=$((n + 2))
echo "rendered $n variants"

# Two objects of one kind and name in a rendering would overwrite each other.
for f in "$work"/render-*.yaml; do
	dup=$(awk '/^kind: / { k = $2 } /^  name: / && k { print k "/" $2; k = "" }' "$f" | sort | uniq -d)
	[ -z "$dup" ] || die "$(basename "$f" .yaml): more than one $dup"
done
# count KIND FILE: objects of a kind in a rendering.
count() { grep -c "^kind: $1\$" "$work/render-$2.yaml" || true; }
expect() { # what, got, want
	[ "$2" = "$3" ] || die "$1: got $2, want $3"
}
expect "layout modules, profile full: Deployments" "$(count Deployment modules-full)" 7
expect "layout modules, profile oob: Deployments" "$(count Deployment modules-oob)" 2
expect "layout profile: Deployments" "$(count Deployment profile-full)" 1
expect "layout single: Deployments" "$(count Deployment single-day2)" 1
expect "bundled PostgreSQL: StatefulSets" "$(count StatefulSet profile-full)" 1
expect "external DSN: StatefulSets" "$(count StatefulSet ci-external)" 0
expect "SQLite: StatefulSets" "$(count StatefulSet ci-sqlite)" 0
expect "SQLite: claims" "$(count PersistentVolumeClaim ci-sqlite)" 1
expect "layout single: PodDisruptionBudgets" "$(count PodDisruptionBudget single-full)" 0
expect "layout modules, full: PodDisruptionBudgets (os has one replica)" "$(count PodDisruptionBudget modules-full)" 6
expect "layout modules, full: Ingresses" "$(count Ingress modules-full)" 1
grep -q -- '- "--profile"' "$work/render-profile-day2.yaml" && grep -A1 -- '- "--profile"' "$work/render-profile-day2.yaml" | grep -q '"day2"' ||
	die "layout profile: no --profile day2 in the rendering"
grep -A1 -- '- "--modules"' "$work/render-explicit-modules.yaml" | grep -q '"api,host"' ||
	die "explicit modules: no --modules api,host in the rendering"
for m in api onboarding provisioning host maintenance telemetry os; do
	grep -A1 -- '- "--modules"' "$work/render-modules-full.yaml" | grep -qx "            - \"$m\"" ||
		die "layout modules: no Deployment with --modules $m"
done
[ "$(grep -c -- '--agent-addr' "$work/render-modules-provisioning.yaml")" = 2 ] ||
	die "layout modules, profile provisioning: want the agent listener in onboarding and provisioning only"
grep -q 'EIM_DATABASE' "$work/render-ci-sqlite.yaml" && die "SQLite: the pods must not get EIM_DATABASE"
grep -A3 'name: EIM_DATABASE' "$work/render-ci-external.yaml" | grep -q 'name: eim-dsn' ||
	die "external DSN: EIM_DATABASE not from the Secret eim-dsn"
grep -A4 'name: EIM_DATABASE' "$work/render-ci-external.yaml" | grep -q 'key: url' ||
	die "external DSN: EIM_DATABASE not from the key url"
grep -q 'image: "registry.example.com/eim/eim@sha256:0123' "$work/render-ci-external.yaml" ||
	die "image digest: the image is not pulled by digest"
grep -q 'image: "eim:0.1.0"' "$work/render-profile-full.yaml" || die "image: want repository:tag from appVersion by default"
grep -q -- '--replica-id=$(POD_NAME)' "$work/render-profile-full.yaml" || die "no --replica-id"
grep -q 'kind: Secret' "$work/render-ci-external.yaml" && die "operator secrets: the chart must not make its own"

step "bad values are refused, naming what is wrong"
refuse() { # message, helm template args…
	local want=$1; shift
	if helm template eim "$chart" --namespace "$ns" --kube-version "$KUBE_VERSION" "$@" >"$work/refused.yaml" 2>"$work/refused.err"; then
		die "helm template $* succeeded, want it refused with \"$want\""
	fi
	grep -qF "$want" "$work/refused.err" || { cat "$work/refused.err"; die "helm template $*: want \"$want\" in the error"; }
}
refuse "SQLite allows one process only" --set database.mode=sqlite
refuse "at '/profile': value must be one of" --set profile=edge
refuse "at '/modules/1': value must be one of" --set 'modules={api,hosts}'
refuse "at '/layout': value must be one of" --set layout=split
refuse "additional properties 'replica' not allowed" --set replica=3
# The templates check the same by themselves (helm --skip-schema-validation).
refuse 'unknown profile "edge"' --skip-schema-validation --set profile=edge
refuse 'unknown module "hosts"' --skip-schema-validation --set 'modules={api,hosts}'
refuse 'layout: "split"' --skip-schema-validation --set layout=split
refuse "enable agent.ingress" --set layout=modules
refuse "database.external.existingSecret" --set database.mode=external
refuse "image.digest" --set image.digest=sha256:xyz
refuse "agent.url" --set agent.url=http://eim.example.com
refuse 'size: "1m"' --set size=1m

# --- a real API server accepts every object ------------------------------
step "waiting for kube-apiserver"
for _ in $(seq 1 120); do
	kubectl get --raw /readyz >/dev/null 2>&1 && break
	kill -0 "$api_pid" 2>/dev/null || { tail -n 30 "$work/apiserver.log"; die "kube-apiserver exited"; }
	sleep 0.5
done
kubectl get --raw /readyz >/dev/null || { tail -n 30 "$work/apiserver.log"; die "kube-apiserver not ready"; }
echo "kube-apiserver ready after $(($(date +%s) - started)) s since the start of this check"
# kubectl 1.25 and later ask the server for strict field validation; an
# older one (Debian bookworm's is 1.20) validates against the server's
# OpenAPI document itself.
validate=strict
kminor=$(kubectl version --client -o json 2>/dev/null | awk -F'"' '$2 == "minor" { print $4 + 0; exit }')
[ "${kminor:-0}" -ge 25 ] || validate=true
kubectl create namespace "$ns" >/dev/null
# The gate itself: objects that are wrong in a way only the server knows
# (a selector that does not match its pods; an unknown field) are refused.
cat >"$work/bad-selector.yaml" <<EOF
apiVersion: apps/v1
kind: Deployment
metadata: {name: bad, namespace: $ns}
spec:
  selector: {matchLabels: {app: a}}
  template:
    metadata: {labels: {app: b}}
    spec: {containers: [{name: c, image: c}]}
EOF
cat >"$work/bad-field.yaml" <<EOF
apiVersion: v1
kind: Service
metadata: {name: bad, namespace: $ns}
spec: {ports: [{port: 80}], selectr: {app: a}}
EOF
for f in bad-selector bad-field; do
	if kubectl apply --dry-run=server --validate=$validate -f "$work/$f.yaml" >/dev/null 2>&1; then
		die "the API server accepted $f.yaml: the check would not catch such an object"
	fi
done
step "kubectl apply --dry-run=server of every rendering"
accepted=0
for f in "$work"/render-*.yaml; do
	if ! kubectl apply --dry-run=server --validate=$validate -f "$f" >"$work/apply.log" 2>&1; then
		cat "$work/apply.log"
		die "the API server rejected $(basename "$f" .yaml)"
	fi
	accepted=$((accepted + $(grep -c '^kind: ' "$f")))
done
echo "$accepted objects of $n renderings accepted"

# --- install, upgrade, uninstall: the shared secrets are made once, kept --
step "helm install, upgrade and uninstall keep the shared secrets"
life=eim-life
kubectl create namespace "$life" >/dev/null
get() { kubectl -n "$life" get secret "$1" -o "jsonpath={.data.${2//./\\.}}"; }
helm install eim "$chart" -n "$life" --set agent.url=https://a.example.com >/dev/null
key1=$(get eim-signing-key signing.key); ca1=$(get eim-agent-ca ca.crt); crt1=$(get eim-agent-tls tls.crt); pw1=$(get eim-database password)
[ -n "$key1" ] && [ -n "$ca1" ] && [ -n "$crt1" ] && [ -n "$pw1" ] || die "helm install: a shared secret is missing"
helm upgrade eim "$chart" -n "$life" --reuse-values >/dev/null
[ "$(get eim-signing-key signing.key)" = "$key1" ] || die "helm upgrade changed the signing key"
[ "$(get eim-agent-ca ca.crt)" = "$ca1" ] || die "helm upgrade changed the agent CA"
[ "$(get eim-agent-tls tls.crt)" = "$crt1" ] || die "helm upgrade re-issued an agent certificate whose names did not change"
[ "$(get eim-database password)" = "$pw1" ] || die "helm upgrade changed the database password"
helm upgrade eim "$chart" -n "$life" --set agent.url=https://b.example.com >/dev/null
[ "$(get eim-signing-key signing.key)" = "$key1" ] || die "helm upgrade with another agent URL changed the signing key"
[ "$(get eim-agent-ca ca.crt)" = "$ca1" ] || die "helm upgrade with another agent URL changed the agent CA"
crt2=$(get eim-agent-tls tls.crt)
[ "$crt2" != "$crt1" ] || die "helm upgrade with another agent URL kept the old certificate"
echo "$ca1" | base64 -d >"$work/life-ca.crt"
echo "$crt2" | base64 -d >"$work/life-tls.crt"
openssl verify -CAfile "$work/life-ca.crt" "$work/life-tls.crt" >/dev/null || die "the re-issued certificate does not verify against the kept CA"
openssl x509 -in "$work/life-tls.crt" -noout -ext subjectAltName | grep -q 'DNS:b.example.com' ||
	die "the re-issued certificate does not name the new agent URL's host"
helm uninstall eim -n "$life" >/dev/null
kubectl -n "$life" get secret eim-signing-key eim-agent-ca >/dev/null 2>&1 || die "helm uninstall deleted the signing key or the CA"
kubectl -n "$life" get secret eim-agent-tls >/dev/null 2>&1 && die "helm uninstall left the agent certificate"
echo "install, upgrade (same names: nothing new; new agent URL: new certificate, same CA and key), uninstall (key and CA kept): ok"

# --- the generated keys work in the real server ---------------------------
step "eim server with the chart's arguments, keys and certificate"
# One pod of layout profile, as the chart renders it: its arguments (the
# paths mapped to files here, the addresses to free loopback ports) and the
# Secrets' contents, on SQLite in a temporary data directory.
helm template eim "$chart" --namespace "$ns" --kube-version "$KUBE_VERSION" \
	--set agent.url=https://127.0.0.1:8443 --set layout=profile >"$work/pod.yaml"
secret() { # name key: the decoded value of a key of a rendered Secret
	awk -v name="$1" -v key="  $2: " '/^---/ { in_secret = 0 } $0 == "  name: " name { in_secret = 1 }
		in_secret && index($0, key) == 1 { print $2; exit }' "$work/pod.yaml" | base64 -d
}
mkdir -p "$work/secrets" "$work/data"
secret eim-signing-key signing.key >"$work/secrets/signing.key"
secret eim-agent-tls tls.crt >"$work/secrets/tls.crt"
secret eim-agent-tls tls.key >"$work/secrets/tls.key"
secret eim-agent-tls ca.crt >"$work/secrets/ca.crt"
chmod 0440 "$work"/secrets/*
(cd "$root" && CGO_ENABLED=0 go build -o "$work/eim" ./cmd/eim)
mapfile -t pod_args < <(awk '/^          args:$/ { a = 1; next } a && !/^            - / { exit }
	a { sub(/^            - /, ""); gsub(/^"|"$/, ""); print }' "$work/pod.yaml")
[ "${pod_args[0]:-}" = server ] || die "no eim server arguments in the rendered Deployment"
# The module contract's flags, until eim server has them (they are being
# added on main): dropped here, with a note, so the rest is still checked.
contract=yes
"$work/eim" server --help 2>&1 | grep -qE '^ +-+profile( |$)' || contract=
args=()
skip=
for a in "${pod_args[@]}"; do
	if [ -n "$skip" ]; then skip=; continue; fi
	case "$a" in
	--profile | --modules) [ -n "$contract" ] || { skip=1; continue; } ;;
	--replica-id=*) [ -n "$contract" ] || continue ;;
	--http-addr=* | --agent-addr=*) a="${a%%=*}=127.0.0.1:0" ;;
	esac
	a=${a//"/var/lib/eim"/$work/data}
	a=${a//"/etc/eim/signing"/$work/secrets}
	a=${a//"/etc/eim/agent-tls"/$work/secrets}
	a=${a//'$(POD_NAME)'/eim-server-0}
	args+=("$a")
done
[ -n "$contract" ] || echo "note: this eim server has no --profile/--modules/--replica-id yet; checked without them"
echo "eim ${args[*]}"
"$work/eim" "${args[@]}" --log-level=warn >"$work/eim.out" 2>"$work/eim.err" &
eim_pid=$!
for _ in $(seq 1 100); do
	grep -q 'serving agents' "$work/eim.out" && break
	kill -0 "$eim_pid" 2>/dev/null || { cat "$work/eim.err"; die "eim server refused the chart's arguments or secrets"; }
	sleep 0.1
done
api_url=$(sed -n 's/^eim: serving API on //p' "$work/eim.out")
fp=$(sed -n 's/.*CA fingerprint sha256:\([0-9a-f]*\).*/\1/p' "$work/eim.out")
[ -n "$api_url" ] && [ -n "$fp" ] || { cat "$work/eim.out" "$work/eim.err"; die "eim server did not start"; }
want_fp=$(openssl x509 -in "$work/secrets/ca.crt" -outform der | sha256sum | cut -d' ' -f1)
expect "the CA fingerprint the server presents" "$fp" "$want_fp"
"$work/eim" token create --admin --ttl 5m --data-dir "$work/none" --signing-key "$work/secrets/signing.key" >"$work/token" 2>/dev/null
"$work/eim" --server "$api_url" --token-file "$work/token" project list >/dev/null ||
	die "a token minted with the chart's signing key was refused"
echo "eim server took the chart's arguments, signing key, CA and certificate (fingerprint $fp)"

echo "chart check passed in $(($(date +%s) - started)) s"
