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
#   5. helm install, upgrade and uninstall on that API server: the shared
#      secrets are made once and kept, the agent certificate re-issued under
#      the same CA when its names change;
#   6. docs/deploy.md's commands, run as written (the block marked for this
#      check): the image built and pushed with crane to a registry of this
#      check's own (crane registry serve), helm template without a cluster
#      nor --kube-version, helm install on the API server;
#   7. the rendered pods run: eim server with a pod's rendered arguments and
#      the generated secrets (its CA fingerprint as pinned, a token minted
#      from the rendered key accepted), and, with EIM_TEST_POSTGRES_URL, every
#      Deployment of layout modules as a process on one database, each until
#      /readyz answers 200.
# Installs what it needs (apt: etcd-server, kubectl from kubernetes-client
# when none is on PATH; go install: helm, and crane at the version
# docs/deploy.md runs) and caches the built tools in
# $EIM_CI_CACHE (default ~/.cache/eim-ci). Measured 2026-11-26 on the 2-core
# machine: warm 26 s; cold (empty tool and Go build caches) 26 min on a machine
# busy with other work (load 9-15), 11 min of CPU, nearly all of it building
# kube-apiserver and helm.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
chart=deploy/helm/eim
HELM_VERSION=v3.22.0
# The Kubernetes version .ci/kube builds; the chart is rendered for it (a helm
# built with go install knows no recent default: v1.20.0, which the chart lets
# through for offline rendering) and the API server reports it.
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
command -v curl >/dev/null 2>&1 || pkgs="$pkgs curl"
if [ -n "$pkgs" ]; then
	step "installing:$pkgs"
	$sudo apt-get update -qq
	# etcd-server's post-install may fail to start a service in a sandbox;
	# the binary is installed all the same.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends $pkgs >/dev/null || true
	for b in etcd kubectl openssl curl; do command -v $b >/dev/null 2>&1 || die "$b not installed"; done
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
etcd_pid=; api_pid=; eim_pids=()
cleanup() {
	set +e
	for p in "${eim_pids[@]}" $api_pid $etcd_pid; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
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
profiles="full provisioning observability day2 clusters devices oob"
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
expect "layout modules, profile full: Deployments" "$(count Deployment modules-full)" 15
expect "layout modules, profile oob: Deployments" "$(count Deployment modules-oob)" 3
expect "layout modules, profile devices: Deployments" "$(count Deployment modules-devices)" 4
expect "layout profile: Deployments" "$(count Deployment profile-full)" 1
expect "layout single: Deployments" "$(count Deployment single-day2)" 1
expect "bundled PostgreSQL: StatefulSets" "$(count StatefulSet profile-full)" 1
expect "external DSN: StatefulSets" "$(count StatefulSet ci-external)" 0
expect "SQLite: StatefulSets" "$(count StatefulSet ci-sqlite)" 0
expect "SQLite: claims" "$(count PersistentVolumeClaim ci-sqlite)" 1
expect "layout single: PodDisruptionBudgets" "$(count PodDisruptionBudget single-full)" 0
expect "layout modules, full: PodDisruptionBudgets (webhooks, os and tenant have one replica)" "$(count PodDisruptionBudget modules-full)" 12
expect "layout modules, full: Ingresses" "$(count Ingress modules-full)" 1
grep -q -- '- "--profile"' "$work/render-profile-day2.yaml" && grep -A1 -- '- "--profile"' "$work/render-profile-day2.yaml" | grep -q '"day2"' ||
	die "layout profile: no --profile day2 in the rendering"
grep -A1 -- '- "--modules"' "$work/render-explicit-modules.yaml" | grep -q '"api,host"' ||
	die "explicit modules: no --modules api,host in the rendering"
for m in api onboarding provisioning host maintenance telemetry exporter clusters,connect webhooks os tenant ui workloads oob objectstorage; do
	grep -A1 -- '- "--modules"' "$work/render-modules-full.yaml" | grep -qx "            - \"$m\"" ||
		die "layout modules: no Deployment with --modules $m"
done
# connect: in the clusters Deployment when both run (both serve under /v2/),
# alone otherwise; every process of it says where its peers reach it.
render modules-connect --set layout=modules --set 'modules={api,connect}' --set agent.ingress.enabled=true --set agent.ingress.host=agents.example.com
grep -A1 -- '- "--modules"' "$work/render-modules-connect.yaml" | grep -qx '            - "connect"' ||
	die "layout modules without clusters: no Deployment with --modules connect"
for r in modules-full modules-connect profile-full; do
	grep -q -- '--connect-peer-url=http://$(POD_IP):8080' "$work/render-$r.yaml" || die "$r: connect without --connect-peer-url from the pod's IP"
	grep -A2 'name: POD_IP' "$work/render-$r.yaml" | grep -q 'fieldPath: status.podIP' || die "$r: no POD_IP from status.podIP"
done
grep -q -- '--connect-peer-url' "$work/render-modules-oob.yaml" && die "layout modules, profile oob: --connect-peer-url without connect"
render modules-ingress --set layout=modules --set http.ingress.enabled=true --set agent.ingress.enabled=true --set agent.ingress.host=agents.example.com
for p in /kubernetes /v2; do
	grep -A4 -- "- path: $p\$" "$work/render-modules-ingress.yaml" | grep -q 'name: eim-clusters' ||
		die "layout modules, full: $p does not go to the clusters Deployment (which runs connect)"
done
grep -A4 -- '- path: /eim.connect.v1$' "$work/render-modules-connect.yaml" | grep -q 'name: eim-connect' ||
	die "layout modules without clusters: the tunnel path does not go to the connect Deployment"
# The API paths other modules serve inside the api module's /v1/projects/{p}/:
# regular expressions in an Ingress of their own (the api one keeps /).
expect "layout modules, full, both Ingresses: Ingresses" "$(count Ingress modules-ingress)" 3
for r in 'edgeworkloads:eim-workloads' 'compute/hosts/[^/]+/bmc:eim-oob' 'objectstorage:eim-objectstorage' 'edgedata/:eim-objectstorage' \
	'enrollment(requests|rules):eim-onboarding'; do
	grep -F -A5 -- "- path: \"/v1/projects/[^/]+/${r%%:*}\"" "$work/render-modules-ingress.yaml" | grep -q "name: ${r#*:}\$" ||
		die "layout modules: the API path …/${r%%:*} does not go to ${r#*:}"
done
awk '/^kind: Ingress/ { i = 1 } i && /name: eim-api-modules/ { m = 1 } m && /use-regex: "true"/ { ok = 1 } END { exit !ok }' "$work/render-modules-ingress.yaml" ||
	die "layout modules: the modules' API Ingress does not ask ingress-nginx for regular expressions"
grep -A3 -- '- path: "/v1/projects/' "$work/render-modules-ingress.yaml" | grep -q 'pathType: ImplementationSpecific' ||
	die "layout modules: the regular-expression paths are not ImplementationSpecific"
for r in /eim.workloads.v1.WorkloadService:eim-workloads /objects/:eim-objectstorage; do
	grep -A4 -- "- path: ${r%%:*}\$" "$work/render-modules-ingress.yaml" | grep -q "name: ${r#*:}\$" ||
		die "layout modules: the agent path ${r%%:*} does not go to ${r#*:}"
done
render profile-ingress --set http.ingress.enabled=true
expect "layout profile with the API's Ingress: Ingresses (one Service serves every path)" "$(count Ingress profile-ingress)" 1
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
refuse "the chart needs 1.27 or later" --kube-version 1.26.0

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
key1=$(get eim-signing-key signing.key); seal1=$(get eim-signing-key secrets.key); ca1=$(get eim-agent-ca ca.crt); crt1=$(get eim-agent-tls tls.crt); pw1=$(get eim-database password)
[ -n "$key1" ] && [ -n "$seal1" ] && [ -n "$ca1" ] && [ -n "$crt1" ] && [ -n "$pw1" ] || die "helm install: a shared secret is missing"
helm upgrade eim "$chart" -n "$life" --reuse-values >/dev/null
[ "$(get eim-signing-key signing.key)" = "$key1" ] || die "helm upgrade changed the signing key"
[ "$(get eim-signing-key secrets.key)" = "$seal1" ] || die "helm upgrade changed the secrets key"
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

# --- docs/deploy.md's commands, as written ---------------------------------
# The block marked for this check, every line as it is but the one setting
# REGISTRY (the reader's registry): here a registry of this check's own.
step "docs/deploy.md: build, push, template and install, as written"
doc=$(awk '/^<!-- deploy\/helm\/check.sh runs the next block/ { f = 1; next }
	f && /^```sh$/ { b = 1; next } b && /^```$/ { exit } b' docs/deploy.md)
[ -n "$doc" ] || die "docs/deploy.md: no block marked for this check"
grep -q '^REGISTRY=' <<<"$doc" || die "docs/deploy.md: the block sets no REGISTRY"
crane_mod=$(grep -o 'github.com/google/go-containerregistry/cmd/crane@[^ ]*' <<<"$doc" | head -n 1)
[ -n "$crane_mod" ] || die "docs/deploy.md: the block pushes with no crane@VERSION"
(cd /tmp && GOBIN="$work/bin" CGO_ENABLED=0 GOFLAGS=-buildvcs=false go install "$crane_mod")
reg_port=$(free_port)
"$work/bin/crane" registry serve --address "127.0.0.1:$reg_port" >"$work/registry.log" 2>&1 &
eim_pids+=($!)
for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$reg_port/v2/" && break; sleep 0.1; done
export REGISTRY=127.0.0.1:$reg_port/edge
grep -v '^REGISTRY=' <<<"$doc" >"$work/doc.sh"
(cd "$root" && bash -euo pipefail "$work/doc.sh") >"$work/doc.log" 2>&1 || { cat "$work/doc.sh" "$work/doc.log"; die "docs/deploy.md's commands failed"; }
"$work/bin/crane" digest "$REGISTRY/eim:v0.1.0" >/dev/null || die "docs/deploy.md: the image is not in the registry"
grep -q "image: \"$REGISTRY/eim:v0.1.0\"" /tmp/eim.yaml || die "docs/deploy.md: helm template did not render the pushed image"
helm status eim -n eim >/dev/null || die "docs/deploy.md: no release eim after helm install"
kubectl -n eim get deployment eim-server -o jsonpath='{.spec.template.spec.containers[0].image}' | grep -qx "$REGISTRY/eim:v0.1.0" ||
	die "docs/deploy.md: the installed Deployment does not run the pushed image"
helm uninstall eim -n eim >/dev/null
unset REGISTRY
echo "docs/deploy.md's commands: image pushed, rendered offline, installed: ok"

# --- the rendered pods run ------------------------------------------------
# pod_args FILE DEPLOYMENT: the eim container's arguments in a rendering,
# one a line, with the pod's paths mapped to files here and its listeners to
# free loopback ports.
pod_args() {
	awk -v dep="$2" '/^kind: / { k = $2 } k == "Deployment" && $0 == "  name: " dep { d = 1 }
		d && /^          args:$/ { a = 1; next } a && !/^            - / { exit }
		a { sub(/^            - /, ""); gsub(/^"|"$/, ""); print }' "$1" |
		sed -e "s#=:\([0-9]*\)\$#=127.0.0.1:0#" -e "s#/var/lib/eim\$#$work/data-$2#" \
			-e "s#/etc/eim/signing/#$work/secrets-$3/#" -e "s#/etc/eim/agent-tls/#$work/secrets-$3/#" \
			-e "s#\$(POD_NAME)#$2-0#" -e "s#\$(POD_IP)#127.0.0.1#"
}
# secrets FILE DIR: the rendered Secrets' files, as the pods mount them.
secrets() {
	mkdir -p "$2"
	secret() { awk -v name="$1" -v key="  $2: " '/^---/ { s = 0 } $0 == "  name: " name { s = 1 }
		s && index($0, key) == 1 { print $2; exit }' "$3" | base64 -d; }
	secret eim-signing-key signing.key "$1" >"$2/signing.key"
	secret eim-signing-key secrets.key "$1" >"$2/secrets.key"
	secret eim-agent-tls tls.crt "$1" >"$2/tls.crt"
	secret eim-agent-tls tls.key "$1" >"$2/tls.key"
	secret eim-agent-tls ca.crt "$1" >"$2/ca.crt"
	chmod 0440 "$2"/*
}
eim_pids=()
# start_pod NAME FILE SECRETS: runs that Deployment's eim server, waits for
# its HTTP listener and sets pod_url to its URL.
start_pod() {
	local args
	mapfile -t args < <(pod_args "$2" "$1" "$3")
	[ "${args[0]:-}" = server ] || die "no eim server arguments for $1 in the rendering"
	echo "eim ${args[*]}" >"$work/$1.cmd"
	: >"$work/$1.out"
	"$work/eim" "${args[@]}" --log-level=warn >"$work/$1.out" 2>"$work/$1.err" &
	eim_pids+=($!)
	local pid=$!
	for _ in $(seq 1 300); do
		grep -q '^eim: serving \(HTTP\|API\) on' "$work/$1.out" && break
		kill -0 "$pid" 2>/dev/null || { cat "$work/$1.cmd" "$work/$1.err"; die "eim server refused the arguments of $1"; }
		sleep 0.1
	done
	pod_url=$(sed -n 's/^eim: serving \(HTTP\|API\) on \(http:[^ ]*\).*/\2/p' "$work/$1.out" | head -n 1)
}
(cd "$root" && CGO_ENABLED=0 go build -o "$work/eim" ./cmd/eim)

step "a pod of layout profile: eim server with its arguments and the generated secrets"
helm template eim "$chart" --namespace "$ns" --kube-version "$KUBE_VERSION" \
	--set agent.url=https://127.0.0.1:8443 --set layout=profile >"$work/pod.yaml"
secrets "$work/pod.yaml" "$work/secrets-profile"
start_pod eim-server "$work/pod.yaml" profile
api_url=$pod_url
cat "$work/eim-server.cmd"
for _ in $(seq 1 100); do grep -q 'serving agents' "$work/eim-server.out" && break; sleep 0.1; done
fp=$(sed -n 's/.*CA fingerprint sha256:\([0-9a-f]*\).*/\1/p' "$work/eim-server.out")
[ -n "$api_url" ] && [ -n "$fp" ] || { cat "$work/eim-server.out" "$work/eim-server.err"; die "eim server did not start"; }
want_fp=$(openssl x509 -in "$work/secrets-profile/ca.crt" -outform der | sha256sum | cut -d' ' -f1)
expect "the CA fingerprint the server presents" "$fp" "$want_fp"
"$work/eim" token create --admin --ttl 5m --data-dir "$work/none" --signing-key "$work/secrets-profile/signing.key" >"$work/token" 2>/dev/null
"$work/eim" --server "$api_url" --token-file "$work/token" project list >/dev/null ||
	die "a token minted with the chart's signing key was refused"
echo "eim server took the chart's arguments, signing key, CA and certificate (fingerprint $fp)"

# Layout modules: every Deployment's process at once on one PostgreSQL
# database, as the chart spreads them; each must become ready.
if [ -n "${EIM_TEST_POSTGRES_URL:-}" ] && command -v psql >/dev/null 2>&1; then
	step "layout modules: a process per module on one PostgreSQL, every one ready"
	pgdb=eim_chart_$$
	psql "$EIM_TEST_POSTGRES_URL" -qc "CREATE DATABASE $pgdb" >/dev/null
	trap 'cleanup; psql "$EIM_TEST_POSTGRES_URL" -qc "DROP DATABASE IF EXISTS $pgdb WITH (FORCE)" >/dev/null 2>&1' EXIT
	base=${EIM_TEST_POSTGRES_URL%%\?*}
	query=; case "$EIM_TEST_POSTGRES_URL" in *\?*) query="?${EIM_TEST_POSTGRES_URL#*\?}" ;; esac
	export EIM_DATABASE="${base%/*}/$pgdb$query"
	helm template eim "$chart" --namespace "$ns" --kube-version "$KUBE_VERSION" --set layout=modules \
		--set agent.ingress.enabled=true --set agent.ingress.host=127.0.0.1 >"$work/modules.yaml"
	secrets "$work/modules.yaml" "$work/secrets-modules"
	urls=()
	for d in $(awk '/^kind: / { k = $2 } k == "Deployment" && /^  name: / { print $2; k = "" }' "$work/modules.yaml"); do
		start_pod "$d" "$work/modules.yaml" modules
		urls+=("$d=$pod_url")
	done
	for u in "${urls[@]}"; do
		ok=
		for _ in $(seq 1 300); do
			[ "$(curl -s -o /dev/null -w '%{http_code}' "${u#*=}/readyz")" = 200 ] && { ok=1; break; }
			sleep 0.2
		done
		[ -n "$ok" ] || { cat "$work/${u%%=*}.cmd" "$work/${u%%=*}.err"; die "${u%%=*}: /readyz did not answer 200 within 60 s"; }
	done
	unset EIM_DATABASE
	echo "${#urls[@]} processes (${urls[*]%%=*}) ready on one database"
else
	echo "note: EIM_TEST_POSTGRES_URL not set: layout modules not run (its processes need PostgreSQL)"
fi

echo "chart check passed in $(($(date +%s) - started)) s"
