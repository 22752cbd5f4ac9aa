{{/* Names and labels. */}}
{{- define "eim.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "eim.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "eim.selectorLabels" -}}
app.kubernetes.io/name: {{ include "eim.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "eim.labels" -}}
{{ include "eim.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The module contract: every module, the profiles, the southbound modules. */}}
{{- define "eim.contract" -}}
all: [api, onboarding, provisioning, host, maintenance, telemetry, exporter, connect, clusters, webhooks, os, tenant, ui, workloads, oob, objectstorage]
southbound: [onboarding, provisioning, host, maintenance, telemetry, connect, clusters, workloads, objectstorage]
profiles:
  full: [api, onboarding, provisioning, host, maintenance, telemetry, exporter, connect, clusters, webhooks, os, tenant, ui, workloads, oob, objectstorage]
  provisioning: [api, onboarding, provisioning, os, tenant, ui]
  observability: [api, host, telemetry, exporter, webhooks]
  day2: [api, host, maintenance, os, telemetry]
  clusters: [api, connect, clusters]
  devices: [api, host, workloads, objectstorage]
  oob: [api, host, oob]
{{- end -}}

{{/* The module set: {modules: [...], explicit: bool}, checked against the contract. */}}
{{- define "eim.moduleSet" -}}
{{- $c := include "eim.contract" . | fromYaml -}}
{{- $mods := list -}}
{{- if .Values.modules -}}
{{- range .Values.modules -}}
{{- if not (has . $c.all) -}}
{{- fail (printf "modules: unknown module %q; known: %s" . (join ", " $c.all)) -}}
{{- end -}}
{{- end -}}
{{- $mods = uniq .Values.modules -}}
{{- else -}}
{{- if not (hasKey $c.profiles .Values.profile) -}}
{{- fail (printf "profile: unknown profile %q; known: %s" .Values.profile (join ", " (keys $c.profiles | sortAlpha))) -}}
{{- end -}}
{{- $mods = get $c.profiles .Values.profile -}}
{{- end -}}
{{- dict "modules" $mods "explicit" (not (empty .Values.modules)) | toYaml -}}
{{- end -}}

{{/*
The Deployments to render: a list of units, each with its name suffix, its
modules, the `eim server` selection flag, replicas and resources.
*/}}
{{- define "eim.units" -}}
{{- /*
Kubernetes 1.27 or later. Not Chart.yaml's kubeVersion: helm checks that
against its built-in default too when it renders without a cluster (helm
template), and a helm built from source (go install) defaults to v1.20.0, so
the chart would not render offline. That default is let through here; a real
cluster's version is checked.
*/ -}}
{{- $kube := .Capabilities.KubeVersion.Version -}}
{{- if and (semverCompare "<1.27.0-0" $kube) (ne $kube "v1.20.0") -}}
{{- fail (printf "Kubernetes %s: the chart needs 1.27 or later" $kube) -}}
{{- end -}}
{{- $c := include "eim.contract" . | fromYaml -}}
{{- $set := include "eim.moduleSet" . | fromYaml -}}
{{- if not (has .Values.layout (list "single" "profile" "modules")) -}}
{{- fail (printf "layout: %q; want single, profile or modules" .Values.layout) -}}
{{- end -}}
{{- if not (hasKey .Values.sizes (toString .Values.size)) -}}
{{- fail (printf "size: %q; want one of %s" (toString .Values.size) (join ", " (keys .Values.sizes | sortAlpha))) -}}
{{- end -}}
{{- $sizes := get .Values.sizes (toString .Values.size) -}}
{{- $units := list -}}
{{- $unitOf := dict -}}
{{- if eq .Values.layout "modules" -}}
{{- /* connect runs in the clusters Deployment when both run: both serve
under /v2/ (connect its tokens and kubeconfigs), which one Ingress prefix
cannot split between two Services. */ -}}
{{- $joined := and (has "connect" $set.modules) (has "clusters" $set.modules) -}}
{{- range $m := $set.modules -}}
{{- if and $joined (eq $m "connect") -}}
{{- $_ := set $unitOf $m "clusters" -}}
{{- else -}}
{{- $s := merge (deepCopy (get $.Values.moduleSettings $m | default dict)) (deepCopy $.Values.moduleDefaults) -}}
{{- $res := $s.resources | default (get $sizes $m) -}}
{{- $mods := list $m -}}
{{- if and $joined (eq $m "clusters") -}}{{- $mods = list "clusters" "connect" -}}{{- end -}}
{{- $_ := set $unitOf $m $m -}}
{{- $units = append $units (dict "name" $m "modules" $mods "selector" (list "--modules" (join "," $mods)) "replicas" (int $s.replicas) "resources" $res "extraArgs" ($s.extraArgs | default list)) -}}
{{- end -}}
{{- end -}}
{{- else -}}
{{- $sel := list "--profile" .Values.profile -}}
{{- if $set.explicit -}}{{- $sel = list "--modules" (join "," $set.modules) -}}{{- end -}}
{{- $replicas := int .Values.replicas -}}
{{- if eq .Values.layout "single" -}}{{- $replicas = 1 -}}{{- end -}}
{{- $units = append $units (dict "name" "server" "modules" $set.modules "selector" $sel "replicas" $replicas "resources" (.Values.resources | default $sizes.process) "extraArgs" list) -}}
{{- range $set.modules -}}{{- $_ := set $unitOf . "server" -}}{{- end -}}
{{- end -}}
{{- $total := 0 -}}
{{- range $units -}}{{- $total = add $total .replicas -}}{{- end -}}
{{- if and (eq .Values.database.mode "sqlite") (ne .Values.layout "single") -}}
{{- fail "database.mode sqlite: SQLite allows one process only; use layout single, or PostgreSQL (external or bundled)" -}}
{{- end -}}
{{- if not (has .Values.database.mode (list "external" "bundled" "sqlite")) -}}
{{- fail (printf "database.mode: %q; want external, bundled or sqlite" .Values.database.mode) -}}
{{- end -}}
{{- if and (eq .Values.database.mode "external") (not .Values.database.external.existingSecret) -}}
{{- fail "database.mode external: set database.external.existingSecret (and .key) to the Secret holding the PostgreSQL DSN" -}}
{{- end -}}
{{- dict "units" $units "totalReplicas" $total "unitOf" $unitOf | toYaml -}}
{{- end -}}

{{/* Whether a module list holds a southbound module ("true" or ""). */}}
{{- define "eim.hasSouthbound" -}}
{{- $c := include "eim.contract" .root | fromYaml -}}
{{- range .modules -}}{{- if has . $c.southbound -}}true{{- end -}}{{- end -}}
{{- end -}}

{{- define "eim.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" .Values.image.digest) -}}
{{- fail (printf "image.digest %q: want sha256: and 64 lower-case hex digits" .Values.image.digest) -}}
{{- end -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{- define "eim.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "eim.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret and key holding the DSN. */}}
{{- define "eim.dsnSecret" -}}
{{- if eq .Values.database.mode "external" -}}
{{- .Values.database.external.existingSecret -}}
{{- else -}}
{{- printf "%s-database" (include "eim.fullname" .) -}}
{{- end -}}
{{- end -}}
{{- define "eim.dsnKey" -}}
{{- if eq .Values.database.mode "external" -}}{{- .Values.database.external.key -}}{{- else -}}dsn{{- end -}}
{{- end -}}

{{- define "eim.signingSecret" -}}
{{- .Values.signingKey.existingSecret | default (printf "%s-signing-key" (include "eim.fullname" .)) -}}
{{- end -}}
{{- define "eim.signingKey" -}}
{{- if .Values.signingKey.existingSecret -}}{{- .Values.signingKey.key -}}{{- else -}}signing.key{{- end -}}
{{- end -}}
{{- define "eim.secretsKey" -}}
{{- if .Values.signingKey.existingSecret -}}{{- .Values.signingKey.secretsKey | default "secrets.key" -}}{{- else -}}secrets.key{{- end -}}
{{- end -}}

{{- define "eim.agentTLSSecret" -}}
{{- .Values.agent.tls.existingSecret | default (printf "%s-agent-tls" (include "eim.fullname" .)) -}}
{{- end -}}
{{- define "eim.agentCAKey" -}}
{{- if .Values.agent.tls.existingSecret -}}{{- .Values.agent.tls.caKey -}}{{- else -}}ca.crt{{- end -}}
{{- end -}}

{{/* The URL nodes dial. */}}
{{- define "eim.agentURL" -}}
{{- if .Values.agent.url -}}
{{- if not (regexMatch "^https://[^/?#@]+(/[^?#]*)?$" .Values.agent.url) -}}
{{- fail (printf "agent.url %q: want https://HOST[:PORT][/PATH]" .Values.agent.url) -}}
{{- end -}}
{{- .Values.agent.url -}}
{{- else if .Values.agent.ingress.enabled -}}
{{- if not .Values.agent.ingress.host -}}{{- fail "agent.ingress.enabled: set agent.ingress.host (and agent.url)" -}}{{- end -}}
{{- printf "https://%s" .Values.agent.ingress.host -}}
{{- else -}}
{{- printf "https://%s-agent.%s.svc:%d" (include "eim.fullname" .) .Release.Namespace (int .Values.agent.port) -}}
{{- end -}}
{{- end -}}

{{/* Names (DNS and IP) of the generated agent certificate, sorted. */}}
{{- define "eim.agentNames" -}}
{{- $fn := include "eim.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- $dns := list -}}
{{- $ips := list -}}
{{- $bases := list (printf "%s-agent" $fn) -}}
{{- if eq .Values.layout "modules" -}}
{{- range (include "eim.units" . | fromYaml).units -}}
{{- $bases = append $bases (printf "%s-%s" $fn .name) -}}
{{- end -}}
{{- end -}}
{{- range $bases -}}
{{- $dns = append $dns . -}}
{{- $dns = append $dns (printf "%s.%s" . $ns) -}}
{{- $dns = append $dns (printf "%s.%s.svc" . $ns) -}}
{{- end -}}
{{- $host := regexReplaceAll "^https://([^/:]+|\\[[^]]+\\])(:[0-9]+)?(/.*)?$" (include "eim.agentURL" .) "${1}" | trimPrefix "[" | trimSuffix "]" -}}
{{- range (append .Values.agent.tls.extraNames $host) -}}
{{- if regexMatch "^[0-9.]+$|:" . -}}
{{- $ips = append $ips . -}}
{{- else -}}
{{- $dns = append $dns (lower .) -}}
{{- end -}}
{{- end -}}
{{- dict "dns" (uniq $dns | sortAlpha) "ips" (uniq $ips | sortAlpha) | toYaml -}}
{{- end -}}
