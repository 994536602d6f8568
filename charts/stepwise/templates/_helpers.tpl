{{/*
Names are fixed, as in config/default: the CRDs and ClusterRoles are
cluster-wide, so a cluster runs one cluster-wide Stepwise, whatever the
release is called. Namespaced installs (rbac.namespaced) may be several, one
per team: their ClusterRoles (metrics only) carry the release's namespace.
*/}}

{{/* The name of a cluster-scoped object: .name, with "-<release namespace>"
in a namespaced install. Takes (dict "root" $ "name" "..."). */}}
{{- define "stepwise.clusterScopedName" -}}
{{- if .root.Values.rbac.namespaced -}}
{{ .name }}-{{ .root.Release.Namespace }}
{{- else -}}
{{ .name }}
{{- end -}}
{{- end }}

{{/* Selector labels: the same as config/default's, so a Deployment installed
with kustomize can be taken over by the chart. */}}
{{- define "stepwise.selectorLabels" -}}
app.kubernetes.io/name: stepwise
app.kubernetes.io/component: manager
{{- end }}

{{- define "stepwise.labels" -}}
{{ include "stepwise.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "stepwise.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}
