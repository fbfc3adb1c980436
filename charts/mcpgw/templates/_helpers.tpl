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

{{/*
mcpgw.validate refuses the combinations that cannot work. All of mcpgw's
state is in SQLite under data_dir today: one pod only.
*/}}
{{- define "mcpgw.validate" -}}
{{- $why := "mcpgw keeps its state in SQLite under data_dir, which two pods cannot share (shared state comes in a later release)" }}
{{- if gt (int .Values.replicaCount) 1 }}
{{- fail (printf "replicaCount is %d, but must be 1: %s" (int .Values.replicaCount) $why) }}
{{- end }}
{{- if .Values.autoscaling.enabled }}
{{- fail (printf "autoscaling.enabled must be false: an HPA would run more than one replica, and %s" $why) }}
{{- end }}
{{- if .Values.podDisruptionBudget.enabled }}
{{- fail (printf "podDisruptionBudget.enabled must be false: with a single replica a PDB only blocks node drains, and %s" $why) }}
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
