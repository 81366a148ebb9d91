{{/*
The labels of every object: config/default's (part-of) and Helm's own, which
dev/test/chart ignores when it compares the chart with config/.
*/}}
{{- define "stackpilot.labels" -}}
app.kubernetes.io/part-of: stackpilot
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/* repository@digest when a digest is given (it pins the image), else repository:tag. */}}
{{- define "stackpilot.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
The manager's args, in config/default's order (config/local's with
executor Local), then the optional flags, each only when its value is set so
that the controller's own default applies otherwise. Takes (list $ shard):
a shard's runner Pods call its own runner Service, where their operations
were registered.
*/}}
{{- define "stackpilot.args" -}}
{{- $shard := index . 1 }}
{{- with index . 0 }}
- --data-dir=/data
- --metrics-bind-address=:8080
- --health-probe-bind-address=:8081
{{- if .Values.dashboard.enabled }}
- --dashboard-bind-address=:{{ .Values.dashboard.port }}
{{- end }}
{{- if .Values.leaderElection }}
- --leader-elect
{{- end }}
- --default-executor={{ .Values.executor }}
{{- with .Values.defaultServiceAccount }}
- --default-service-account={{ . }}
{{- end }}
{{- if eq .Values.executor "Job" }}
- --runner-endpoint=https://stackpilot-runner{{ with $shard }}-{{ . }}{{ end }}.$(POD_NAMESPACE).svc:9444
{{- end }}
{{- with .Values.runnerImage }}
- --runner-image={{ . }}
{{- end }}
{{- if not (kindIs "invalid" .Values.maxConcurrentJobs) }}
- --max-concurrent-jobs={{ .Values.maxConcurrentJobs }}
{{- end }}
{{- if not (kindIs "invalid" .Values.concurrentOperations) }}
- --concurrent-operations={{ .Values.concurrentOperations }}
{{- end }}
{{- with .Values.defaultBackend }}
- --default-backend={{ . }}
{{- end }}
{{- with .Values.watchNamespaces }}
- --watch-namespace={{ join "," . }}
{{- end }}
{{- if .Values.allowCrossNamespaceRefs }}
- --allow-cross-namespace-refs
{{- end }}
{{- if not .Values.webhook.enabled }}
- --webhook-bind-address=0
{{- end }}
{{- if .Values.logs.tlsSecretName }}
- --logs-cert-dir=/etc/stackpilot/logs-tls
{{- end }}
{{- end }}
{{- end }}

{{/*
A YAML document of files/ (a copy `make manifests` makes from config/) as an
object of this release: in its namespace, with the chart's labels added.
Takes (list $ document).
*/}}
{{- define "stackpilot.fromFile" -}}
{{- $root := index . 0 -}}
{{- $obj := fromYaml (index . 1) -}}
{{- $meta := $obj.metadata -}}
{{- if hasKey $meta "namespace" }}
{{- $_ := set $meta "namespace" $root.Release.Namespace }}
{{- end }}
{{- $_ := set $meta "labels" (merge (fromYaml (include "stackpilot.labels" $root)) ($meta.labels | default dict)) }}
{{- toYaml $obj }}
{{- end }}
