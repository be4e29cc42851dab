{{- define "loadgen.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "loadgen.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 50 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 50 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "loadgen.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "loadgen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: chf-testbed
{{- end }}

{{- define "loadgen.selectorLabels" -}}
app.kubernetes.io/name: {{ include "loadgen.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "loadgen.dnsPolicy" -}}
{{- if .Values.network.dnsPolicy }}
{{- .Values.network.dnsPolicy }}
{{- else if .Values.network.hostNetwork }}
{{- "ClusterFirstWithHostNet" }}
{{- else }}
{{- "ClusterFirst" }}
{{- end }}
{{- end }}

{{- define "loadgen.claimName" -}}
{{- default (printf "%s-results" (include "loadgen.fullname" .)) .Values.results.persistence.existingClaim }}
{{- end }}

{{/*
loadgen.startAt: the shards' common start (values startAt, else startDelay
after rendering), RFC 3339 in UTC.
*/}}
{{- define "loadgen.startAt" -}}
{{- if .Values.startAt -}}
{{- .Values.startAt -}}
{{- else -}}
{{- dateInZone "2006-01-02T15:04:05Z07:00" (dateModify (printf "+%s" .Values.startDelay) now) "UTC" -}}
{{- end -}}
{{- end }}
