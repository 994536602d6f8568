{{/*
Names are fixed, as in config/default: the CRDs and ClusterRoles are
cluster-wide, so a cluster runs one Stepwise, whatever the release is called.
*/}}

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
