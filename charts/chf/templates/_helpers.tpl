{{/* Chart name, truncated to the 63 characters a DNS label allows. */}}
{{- define "chf.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name prefix of every object. Components append "-cgw" etc., so
it is truncated to leave room for the longest suffix ("-aerospike"). */}}
{{- define "chf.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "chf.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "chf.labels" -}}
helm.sh/chart: {{ include "chf.chart" . }}
app.kubernetes.io/name: {{ include "chf.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: chf-testbed
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component; call with (dict "ctx" $ "component" "cgw"). */}}
{{- define "chf.selectorLabels" -}}
app.kubernetes.io/name: {{ include "chf.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "chf.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "chf.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "chf.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Service (and EndpointSlice service-name) of a component. */}}
{{- define "chf.serviceName" -}}
{{- printf "%s-%s" (include "chf.fullname" .ctx) .component }}
{{- end }}

{{/* dnsPolicy: explicit, or derived from hostNetwork. */}}
{{- define "chf.dnsPolicy" -}}
{{- if .Values.network.dnsPolicy }}
{{- .Values.network.dnsPolicy }}
{{- else if .Values.network.hostNetwork }}
{{- "ClusterFirstWithHostNet" }}
{{- else }}
{{- "ClusterFirst" }}
{{- end }}
{{- end }}

{{/* The Aerospike seed list ABM and the provisioning Job use (CHF_AEROSPIKE):
external hosts, else the aslite Service (its fixed clusterIP when set, so
that no cluster DNS is needed), else every StatefulSet pod's DNS name. */}}
{{- define "chf.aerospikeHosts" -}}
{{- if .Values.aerospike.external.hosts }}
{{- join "," .Values.aerospike.external.hosts }}
{{- else if .Values.aerospike.aslite.enabled }}
{{- include "chf.hostPort" (dict "host" (.Values.aerospike.aslite.clusterIP | default (printf "%s-aslite.%s.svc" (include "chf.fullname" .) .Release.Namespace)) "port" 3000) }}
{{- else }}
{{- $fn := include "chf.fullname" . }}
{{- $hosts := list }}
{{- range $i := until (int .Values.aerospike.replicas) }}
{{- $hosts = append $hosts (printf "%s-aerospike-%d.%s-aerospike.%s.svc:3000" $fn $i $fn $.Release.Namespace) }}
{{- end }}
{{- join "," $hosts }}
{{- end }}
{{- end }}

{{/* host:port, the host in brackets when it is an IPv6 address; call with
(dict "host" H "port" P). */}}
{{- define "chf.hostPort" -}}
{{- if contains ":" (toString .host) }}
{{- printf "[%s]:%d" .host (int .port) }}
{{- else }}
{{- printf "%s:%d" .host (int .port) }}
{{- end }}
{{- end }}

{{/* True ("true") when the store runs in the cluster: the Aerospike
StatefulSet or the aslite Deployment. */}}
{{- define "chf.aerospikeInCluster" -}}
{{- if not .Values.aerospike.external.hosts }}true{{ end }}
{{- end }}

{{/* The component label of the in-cluster store's pods: aslite or aerospike. */}}
{{- define "chf.storeComponent" -}}
{{- if .Values.aerospike.aslite.enabled }}aslite{{ else }}aerospike{{ end }}
{{- end }}

{{/* The CGW's Nchf address, scheme://host:port: its fixed clusterIP when
cgw.clusterIP is set (no cluster DNS needed), else the Service's DNS name. */}}
{{- define "chf.cgwTarget" -}}
{{- $host := .Values.cgw.clusterIP | default (printf "%s-cgw.%s.svc" (include "chf.fullname" .) .Release.Namespace) }}
{{- printf "%s://%s" (ternary "https" "http" .Values.tls.enabled) (include "chf.hostPort" (dict "host" $host "port" .Values.cgw.port)) }}
{{- end }}

{{/* The Multus networks annotation value. */}}
{{- define "chf.multusNetworks" -}}
{{- $n := .Values.network.multus }}
{{- list (dict "name" $n.name "namespace" .Release.Namespace "interface" $n.interface) | toJson }}
{{- end }}

{{/*
Checks that need more than the JSON schema can say; each fails rendering
with a message naming the value to change.
*/}}
{{- define "chf.validate" -}}
{{- if .Values.cpuPinning }}
{{- range $c := list "cgw" "ocp" "abm" }}
{{- $r := (index $.Values $c).resources }}
{{- $req := $r.requests | default dict }}
{{- $lim := $r.limits | default dict }}
{{- if or (not $req.cpu) (not $lim.cpu) (not $req.memory) (not $lim.memory) }}
{{- fail (printf "cpuPinning=true needs %s.resources.requests and .limits to set both cpu and memory (Guaranteed QoS)" $c) }}
{{- end }}
{{- if ne (toString $req.cpu) (toString $lim.cpu) }}
{{- fail (printf "cpuPinning=true needs %s.resources.requests.cpu (%v) equal to limits.cpu (%v) for Guaranteed QoS" $c $req.cpu $lim.cpu) }}
{{- end }}
{{- if ne (toString $req.memory) (toString $lim.memory) }}
{{- fail (printf "cpuPinning=true needs %s.resources.requests.memory (%v) equal to limits.memory (%v) for Guaranteed QoS" $c $req.memory $lim.memory) }}
{{- end }}
{{- if not (regexMatch "^[1-9][0-9]*$" (toString $lim.cpu)) }}
{{- fail (printf "cpuPinning=true needs an integer number of CPUs in %s.resources.limits.cpu (got %v): the static CPU manager pins only integer CPUs" $c $lim.cpu) }}
{{- end }}
{{- end }}
{{- end }}
{{- if .Values.network.multus.enabled }}
{{- /* Without config the attachment has none, and Multus reads each
  node's file of that name (values.yaml). */}}
{{- if and .Values.network.multus.createAttachmentDefinition .Values.network.multus.config }}
{{- $cni := fromJson .Values.network.multus.config }}
{{- if hasKey $cni "Error" }}
{{- fail (printf "network.multus.config is not valid JSON: %v" $cni.Error) }}
{{- end }}
{{- if ne (toString $cni.name) .Values.network.multus.name }}
{{- fail (printf "network.multus.config's \"name\" (%v) must equal network.multus.name (%s)" $cni.name .Values.network.multus.name) }}
{{- end }}
{{- end }}
{{- end }}
{{- if and .Values.network.hostNetwork .Values.networkPolicy.enabled (include "chf.aerospikeInCluster" .) (not .Values.networkPolicy.nodeCIDRs) }}
{{- fail "network.hostNetwork=true with networkPolicy.enabled=true needs networkPolicy.nodeCIDRs (the nodes' address ranges: host-network pods reach Aerospike from node IPs), or networkPolicy.enabled=false" }}
{{- end }}
{{- if and .Values.network.hostNetwork (ne (include "chf.dnsPolicy" .) "ClusterFirstWithHostNet") }}
{{- fail "network.hostNetwork=true needs network.dnsPolicy ClusterFirstWithHostNet (or empty) so pods still resolve cluster Services" }}
{{- end }}
{{- if and .Values.aerospike.aslite.enabled .Values.aerospike.external.hosts }}
{{- fail "aerospike.aslite.enabled=true and aerospike.external.hosts are exclusive: choose the aslite store or the external cluster" }}
{{- end }}
{{- $ports := list (int .Values.cgw.port) (int .Values.ocp.port) (int .Values.abm.port) }}
{{- if .Values.cgw.diameter.enabled }}{{ $ports = append $ports (int .Values.cgw.diameter.port) }}{{ end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "component ports must not collide (cgw.port, ocp.port, abm.port, cgw.diameter.port): %v" $ports) }}
{{- end }}
{{- end }}

{{/*
A probe's handler: a TCP check when "tcp" (mTLS required: the kubelet has
no client certificate), else an HTTP(S) GET of "path" on the http port.
*/}}
{{- define "chf.probe" -}}
{{- if .tcp -}}
tcpSocket:
  port: http
{{- else -}}
httpGet:
  path: {{ .path }}
  port: http
  {{- if .tls }}
  scheme: HTTPS
  {{- end }}
{{- end -}}
{{- end }}
