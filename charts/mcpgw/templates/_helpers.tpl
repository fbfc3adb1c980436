{{- define "mcpgw.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "mcpgw.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "mcpgw.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "mcpgw.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "mcpgw.selectorLabels" -}}
app.kubernetes.io/name: {{ include "mcpgw.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "mcpgw.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "mcpgw.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "mcpgw.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* mcpgw.postgres: whether the replicas share state in PostgreSQL. */}}
{{- define "mcpgw.postgres" -}}
{{- if eq .Values.store.driver "postgres" }}true{{ end }}
{{- end }}

{{/* mcpgw.minReplicas: how many replicas run at least. */}}
{{- define "mcpgw.minReplicas" -}}
{{- if .Values.autoscaling.enabled }}{{ int .Values.autoscaling.minReplicas }}{{ else }}{{ int .Values.replicaCount }}{{ end }}
{{- end }}

{{/* mcpgw.multiReplica: whether more than one replica may run. */}}
{{- define "mcpgw.multiReplica" -}}
{{- if or (gt (int .Values.replicaCount) 1) (and .Values.autoscaling.enabled (gt (int .Values.autoscaling.maxReplicas) 1)) }}true{{ end }}
{{- end }}

{{/*
mcpgw.validate refuses the combinations that cannot work. With SQLite the
state is a file under data_dir: one pod only. With PostgreSQL replicas
share the database, but each keeps its own data_dir.
*/}}
{{- define "mcpgw.validate" -}}
{{- $st := .Values.store }}
{{- if include "mcpgw.postgres" . }}
{{- if not (or $st.dsn $st.existingSecret) }}
{{- fail "store.driver postgres needs the database's URL: store.dsn, or store.existingSecret (and store.existingSecretKey) naming a Secret that holds it" }}
{{- end }}
{{- if and $st.dsn $st.existingSecret }}
{{- fail "store.dsn and store.existingSecret are both set: give the database's URL in one place" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- fail (printf "autoscaling.minReplicas (%d) is above autoscaling.maxReplicas (%d)" (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas)) }}
{{- end }}
{{- if and .Values.persistence.enabled (include "mcpgw.multiReplica" .) }}
{{- if has .Values.persistence.accessMode (list "ReadWriteOnce" "ReadWriteOncePod") }}
{{- fail (printf "persistence.enabled must be false with more than one replica: a %s volume cannot be attached to pods on different nodes; leave it off and data_dir (the servers' logs, media) is an emptyDir per replica" .Values.persistence.accessMode) }}
{{- else }}
{{- fail "persistence.enabled must be false with more than one replica: each replica rotates the servers' log files and trims the media store under data_dir by itself, so replicas must not share one; leave it off and data_dir is an emptyDir per replica" }}
{{- end }}
{{- end }}
{{- $ma := .Values.podDisruptionBudget.minAvailable }}
{{- if and .Values.podDisruptionBudget.enabled (not (kindIs "string" $ma)) }}
{{- $min := int (include "mcpgw.minReplicas" .) }}
{{- if ge (int $ma) $min }}
{{- fail (printf "podDisruptionBudget.minAvailable is %d, but only %d %s guaranteed: the PDB would block every node drain; raise replicaCount (or autoscaling.minReplicas) or lower minAvailable" (int $ma) $min (ternary "replica is" "replicas are" (eq $min 1))) }}
{{- end }}
{{- end }}
{{- range .Values.extraEnv }}
{{- if eq .name "MCPGW_DATABASE_URL" }}
{{- fail "extraEnv sets MCPGW_DATABASE_URL, which the chart sets from store.dsn or store.existingSecret" }}
{{- end }}
{{- if eq .name "MCPGW_POD_IP" }}
{{- fail "extraEnv sets MCPGW_POD_IP, which the chart sets from the pod's IP for cluster.self_url" }}
{{- end }}
{{- end }}
{{- if and (include "mcpgw.multiReplica" .) (not (or .Values.secrets.signingKey .Values.secrets.existingSecret .Values.config.secret)) }}
{{- fail "secrets.signingKey (or MCPGW_SECRET in secrets.existingSecret) is needed with more than one replica: each replica would pick its own random key, and none would accept another's session ids, cursors, media URLs or forwarded requests" }}
{{- end }}
{{- else }}
{{- $why := "SQLite under data_dir cannot be shared by two pods; set store.driver: postgres (and store.dsn or store.existingSecret) to run more" }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d, but must be 1 with store.driver sqlite: %s" (int .Values.replicaCount) $why) }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- fail (printf "autoscaling.enabled must be false with store.driver sqlite: an HPA would run more than one replica, and %s" $why) }}
{{- end }}
{{- if .Values.podDisruptionBudget.enabled }}
{{- fail "podDisruptionBudget.enabled must be false with store.driver sqlite: with one replica a PDB only blocks node drains; set store.driver: postgres to run more replicas" }}
{{- end }}
{{- if $st.dsn }}
{{- fail "store.dsn is set, but store.driver is sqlite: set store.driver: postgres, or leave store.dsn empty" }}
{{- end }}
{{- if $st.existingSecret }}
{{- fail "store.existingSecret is set, but store.driver is sqlite: set store.driver: postgres, or leave store.existingSecret empty" }}
{{- end }}
{{- if $st.maxConns }}
{{- fail "store.maxConns is set, but store.driver is sqlite: set store.driver: postgres, or leave store.maxConns 0" }}
{{- end }}
{{- end }}
{{- $cs := dig "store" (dict) .Values.config }}
{{- if kindIs "map" $cs }}
{{- range $k := list "driver" "dsn" "max_conns" }}
{{- if hasKey $cs $k }}
{{- fail (printf "config.store.%s is set: use the chart's store values (store.driver, store.dsn or store.existingSecret, store.maxConns); the chart renders config.store from them, keeps the database's URL in a Secret, and allows replicas only with postgres" $k) }}
{{- end }}
{{- end }}
{{- end }}
{{- $cc := dig "cluster" (dict) .Values.config }}
{{- if and (kindIs "map" $cc) (hasKey $cc "self_url") }}
{{- fail "config.cluster.self_url is set: the chart renders it from the pod's IP (MCPGW_POD_IP) and containerPort with store.driver postgres" }}
{{- end }}
{{- if and .Values.secrets.existingSecret (or .Values.secrets.signingKey .Values.secrets.env) }}
{{- fail "secrets.existingSecret is set: put the signing key (MCPGW_SECRET) and the other variables in that Secret, and leave secrets.signingKey and secrets.env empty" }}
{{- end }}
{{- if and .Values.ingress.enabled (not .Values.ingress.hosts) }}
{{- fail "ingress.enabled needs ingress.hosts: at least one host name (the first is the gateway's public_url)" }}
{{- end }}
{{- if and .Values.ingress.certManager.enabled (not .Values.ingress.certManager.issuer) }}
{{- fail "ingress.certManager.enabled needs ingress.certManager.issuer: the (Cluster)Issuer that signs the certificate" }}
{{- end }}
{{- if and .Values.ingress.certManager.enabled (not .Values.ingress.tls.enabled) }}
{{- fail "ingress.certManager.enabled needs ingress.tls.enabled: cert-manager fills the TLS Secret the ingress names" }}
{{- end }}
{{- end }}

{{/* mcpgw.config is the gateway's configuration, as a YAML document. */}}
{{- define "mcpgw.config" -}}
{{- $base := dict "listen" (printf "0.0.0.0:%d" (int .Values.containerPort)) "data_dir" "/data" "secret" "${MCPGW_SECRET:-}" "log" (dict "format" "json") }}
{{- if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- $_ := set $base "public_url" (printf "%s://%s" (ternary "https" "http" .Values.ingress.tls.enabled) (first .Values.ingress.hosts)) }}
{{- end }}
{{- if .Values.secrets.adminTokenHashes }}
{{- $_ := set $base "admin" (dict "tokens" .Values.secrets.adminTokenHashes) }}
{{- end }}
{{- if .Values.secrets.apiKeys }}
{{- $_ := set $base "auth" (dict "api_keys" .Values.secrets.apiKeys) }}
{{- end }}
{{- if include "mcpgw.postgres" . }}
{{- /* The URL holds a password: the config names only its variable. */}}
{{- $store := dict "driver" "postgres" "dsn" "${MCPGW_DATABASE_URL}" }}
{{- if .Values.store.maxConns }}
{{- $_ := set $store "max_conns" (int .Values.store.maxConns) }}
{{- end }}
{{- $_ := set $base "store" $store }}
{{- /* Other replicas forward a session's requests here, pod to pod. */}}
{{- $_ := set $base "cluster" (dict "enabled" true "self_url" (printf "http://${MCPGW_POD_IP}:%d" (int .Values.containerPort))) }}
{{- end }}
{{- $cfg := mustMergeOverwrite $base (deepCopy .Values.config) }}
{{- toYaml $cfg }}
{{- end }}

{{/* mcpgw.configInSecret: whether the config holds token hashes. */}}
{{- define "mcpgw.configInSecret" -}}
{{- if or .Values.secrets.adminTokenHashes .Values.secrets.apiKeys (dig "admin" "tokens" nil .Values.config) (dig "auth" "api_keys" nil .Values.config) }}true{{ end }}
{{- end }}

{{/* mcpgw.envSecretName: the Secret whose keys become environment variables, if any. */}}
{{- define "mcpgw.envSecretName" -}}
{{- if .Values.secrets.existingSecret }}
{{- .Values.secrets.existingSecret }}
{{- else if or .Values.secrets.signingKey .Values.secrets.env }}
{{- include "mcpgw.fullname" . }}
{{- end }}
{{- end }}

{{- define "mcpgw.pvcName" -}}
{{- default (printf "%s-data" (include "mcpgw.fullname" .)) .Values.persistence.existingClaim }}
{{- end }}

{{/* mcpgw.databaseSecretName: the Secret holding the PostgreSQL URL. */}}
{{- define "mcpgw.databaseSecretName" -}}
{{- default (printf "%s-database" (include "mcpgw.fullname" .)) .Values.store.existingSecret }}
{{- end }}

{{/* mcpgw.databaseSecretKey: the key of the URL in that Secret. */}}
{{- define "mcpgw.databaseSecretKey" -}}
{{- if .Values.store.existingSecret }}{{ .Values.store.existingSecretKey }}{{ else }}MCPGW_DATABASE_URL{{ end }}
{{- end }}

{{/* mcpgw.headlessName: the headless Service's name, a DNS label. */}}
{{- define "mcpgw.headlessName" -}}
{{- printf "%s-headless" (include "mcpgw.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}
