{{/*
Names are fixed rather than release-prefixed: the APIService, the RBAC and the
e2b Service are referred to by these names from outside the chart (docs,
wildcard DNS, E2B_API_URL), so the release name is free.
*/}}
{{- define "sandbox-operator.apiserverName" -}}sandbox-apiserver{{- end }}
{{- define "sandbox-operator.e2bName" -}}sandbox-apiserver-e2b{{- end }}
{{- define "sandbox-operator.proxyName" -}}sandbox-envd-proxy{{- end }}
{{- define "sandbox-operator.envdSecretRenderedName" -}}sandbox-envd-secret{{- end }}
{{- define "sandbox-operator.aliasesName" -}}sandbox-apiserver-e2b-aliases{{- end }}

{{/* Labels every object carries. */}}
{{- define "sandbox-operator.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/part-of: sandbox-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Selector labels. They leave out the release name so a renamed release
can adopt the Deployments (selectors are immutable).
*/}}
{{- define "sandbox-operator.apiserverSelector" -}}
app.kubernetes.io/name: sandbox-apiserver
app.kubernetes.io/component: apiserver
{{- end }}
{{- define "sandbox-operator.proxySelector" -}}
app.kubernetes.io/name: sandbox-envd-proxy
app.kubernetes.io/component: envd-proxy
{{- end }}

{{/*
metricsLabelKey marks the Services the ServiceMonitors select, its value the
binary behind them: the app labels alone also match the e2b Service and the
proxy's data-plane Service.
*/}}
{{- define "sandbox-operator.metricsLabelKey" -}}sandbox.cocoonstack.io/metrics{{- end }}

{{- define "sandbox-operator.apiserverImage" -}}
{{ .Values.apiserver.image.repository }}:{{ .Values.apiserver.image.tag | default "latest" }}
{{- end }}
{{- define "sandbox-operator.proxyImage" -}}
{{ .Values.envdProxy.image.repository }}:{{ .Values.envdProxy.image.tag | default "latest" }}
{{- end }}

{{/* The envd proxy's --domain: its own value, else the e2b surface's. */}}
{{- define "sandbox-operator.proxyDomain" -}}
{{ .Values.envdProxy.domain | default .Values.apiserver.e2b.domain }}
{{- end }}

{{/* The Secret holding the envd secret: the rendered one when a value is set. */}}
{{- define "sandbox-operator.envdSecretName" -}}
{{- if .Values.apiserver.e2b.envdSecret.value -}}
{{ include "sandbox-operator.envdSecretRenderedName" . }}
{{- else -}}
{{ .Values.apiserver.e2b.envdSecret.secretName }}
{{- end -}}
{{- end }}

{{/*
validate fails the render on a value set that would deploy something broken:
the e2b surface without keys (it refuses to serve unauthenticated), without an
envd secret or without a domain (no reachable data plane), template builds the
binary would refuse at startup (validateBuilds), and an APIService whose CA
nobody supplies. templates/validate.yaml runs it on every render.
*/}}
{{- define "sandbox-operator.validate" -}}
{{- $e2b := .Values.apiserver.e2b -}}
{{- if $e2b.enabled -}}
{{- if not $e2b.apiKeySecret.name -}}
{{- fail "apiserver.e2b.apiKeySecret.name is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- if not (or $e2b.envdSecret.value $e2b.envdSecret.secretName) -}}
{{- fail "apiserver.e2b.envdSecret.value or apiserver.e2b.envdSecret.secretName is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- if not $e2b.domain -}}
{{- fail "apiserver.e2b.domain is required when apiserver.e2b.enabled is true" -}}
{{- end -}}
{{- end -}}
{{- include "sandbox-operator.validateBuilds" . -}}
{{- include "sandbox-operator.validateMonitoring" . -}}
{{- if and (not .Values.certManager.enabled) (not .Values.certManager.caBundle) -}}
{{- fail "certManager.caBundle is required when certManager.enabled is false" -}}
{{- end -}}
{{- end }}

{{/*
validateBuilds checks apiserver.e2b.builds when it is enabled: the build API is
part of the e2b surface, it needs exactly one store for the archives COPY
steps upload (sandbox-apiserver refuses none and both), and the numbers must
be ones the binary and the Service accept. Disabled, nothing under builds is
rendered, so nothing is checked.
*/}}
{{- define "sandbox-operator.validateBuilds" -}}
{{- $e2b := .Values.apiserver.e2b -}}
{{- $b := $e2b.builds -}}
{{- if $b.enabled -}}
{{- if not $e2b.enabled -}}
{{- fail "apiserver.e2b.builds.enabled requires apiserver.e2b.enabled: the template build API is part of the e2b surface" -}}
{{- end -}}
{{- if and $b.dir.existingClaim $b.s3.bucket -}}
{{- fail "apiserver.e2b.builds.dir.existingClaim and apiserver.e2b.builds.s3.bucket name two build stores: set only one" -}}
{{- end -}}
{{- if not (or $b.dir.existingClaim $b.s3.bucket) -}}
{{- fail "apiserver.e2b.builds.dir.existingClaim or apiserver.e2b.builds.s3.bucket is required when apiserver.e2b.builds.enabled is true" -}}
{{- end -}}
{{- if and $b.dir.existingClaim (not (hasPrefix "/" (toString $b.dir.mountPath))) -}}
{{- fail "apiserver.e2b.builds.dir.mountPath must be an absolute path when apiserver.e2b.builds.dir.existingClaim is set" -}}
{{- end -}}
{{- if lt ($b.parallel | int) 1 -}}
{{- fail "apiserver.e2b.builds.parallel must be at least 1" -}}
{{- end -}}
{{- if not $b.timeout -}}
{{- fail "apiserver.e2b.builds.timeout is required when apiserver.e2b.builds.enabled is true" -}}
{{- end -}}
{{- if lt ($b.logLines | int) 1 -}}
{{- fail "apiserver.e2b.builds.logLines must be at least 1" -}}
{{- end -}}
{{- if lt ($b.uploadMax | int64) 1 -}}
{{- fail "apiserver.e2b.builds.uploadMax must be at least 1" -}}
{{- end -}}
{{- $affinity := $b.affinityTimeoutSeconds | int -}}
{{- if or (lt $affinity 1) (gt $affinity 86400) -}}
{{- fail "apiserver.e2b.builds.affinityTimeoutSeconds must be between 1 and 86400 (the Service's sessionAffinityConfig limit)" -}}
{{- end -}}
{{- end -}}
{{- end }}

{{/*
validateMonitoring checks the monitoring values of the parts that are on, so a
typo fails the render instead of an object prometheus-operator or Prometheus
refuses later: a binding without the ServiceAccount's namespace, a metrics
port the proxy's own listener already takes, and alert settings that would
not make a rule (a duration Prometheus cannot parse, a threshold that is not
a positive number, no severity).
*/}}
{{- define "sandbox-operator.validateMonitoring" -}}
{{- $m := .Values.monitoring -}}
{{- $sm := $m.serviceMonitor -}}
{{- if $sm.enabled -}}
{{- with $sm.prometheusServiceAccount -}}
{{- if and .name (not .namespace) -}}
{{- fail "monitoring.serviceMonitor.prometheusServiceAccount.namespace is required when its name is set" -}}
{{- end -}}
{{- end -}}
{{- if $.Values.apiserver.e2b.enabled -}}
{{- $port := $sm.envdProxyMetricsPort | int -}}
{{- if or (lt $port 1) (gt $port 65535) -}}
{{- fail "monitoring.serviceMonitor.envdProxyMetricsPort must be a port number between 1 and 65535" -}}
{{- end -}}
{{- if eq $port ($.Values.envdProxy.port | int) -}}
{{- fail "monitoring.serviceMonitor.envdProxyMetricsPort must differ from envdProxy.port" -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $rule := $m.prometheusRule -}}
{{- if $rule.enabled -}}
{{- if not $rule.runbookBaseURL -}}
{{- fail "monitoring.prometheusRule.runbookBaseURL is required when monitoring.prometheusRule.enabled is true" -}}
{{- end -}}
{{- /* Prometheus's duration syntax, units largest first, at least one. */ -}}
{{- $duration := "^([0-9]+y)?([0-9]+w)?([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?([0-9]+ms)?$" -}}
{{- range $name, $alert := $rule.alerts -}}
{{- if not $alert.severity -}}
{{- fail (printf "monitoring.prometheusRule.alerts.%s.severity is required" $name) -}}
{{- end -}}
{{- range $key := list "for" "window" -}}
{{- if or (eq $key "for") (hasKey $alert $key) -}}
{{- $v := toString (index $alert $key) -}}
{{- if or (eq $v "") (not (regexMatch $duration $v)) -}}
{{- fail (printf "monitoring.prometheusRule.alerts.%s.%s must be a Prometheus duration such as 5m, not %q" $name $key $v) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- range $key := list "p99Seconds" "maxAgeSeconds" "ratio" -}}
{{- if hasKey $alert $key -}}
{{- if le (index $alert $key | float64) 0.0 -}}
{{- fail (printf "monitoring.prometheusRule.alerts.%s.%s must be a number above 0" $name $key) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if gt ($rule.alerts.dataPlaneErrors.ratio | float64) 1.0 -}}
{{- fail "monitoring.prometheusRule.alerts.dataPlaneErrors.ratio is a share of requests: at most 1" -}}
{{- end -}}
{{- end -}}
{{- if and $m.grafanaDashboard.enabled (not $m.grafanaDashboard.labelKey) -}}
{{- fail "monitoring.grafanaDashboard.labelKey is required when monitoring.grafanaDashboard.enabled is true: the sidecar finds dashboards by it" -}}
{{- end -}}
{{- end }}

{{/* Pod-level security context shared by both Deployments. */}}
{{- define "sandbox-operator.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Container-level security context shared by both Deployments. */}}
{{- define "sandbox-operator.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: ["ALL"]
{{- end }}
