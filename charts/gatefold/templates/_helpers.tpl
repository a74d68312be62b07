{{/*
Labels Helm's tools expect on every object the chart renders, besides the
objects' own. Selectors use only app.kubernetes.io/name and component, as
config/ does.
*/}}
{{- define "gatefold.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The manager's pods. */}}
{{- define "gatefold.selector" -}}
app.kubernetes.io/name: gatefold
app.kubernetes.io/component: manager
{{- end }}

{{/* The ServiceAccount the manager runs as, as system:serviceaccount:... */}}
{{- define "gatefold.serviceAccountSubject" -}}
- kind: ServiceAccount
  name: gatefold-controller-manager
  namespace: {{ .Release.Namespace }}
{{- end }}

{{/* The image reference: repository, then :tag (appVersion when empty), then @digest. */}}
{{- define "gatefold.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- .Values.image.repository }}{{ if $tag }}:{{ $tag }}{{ end }}{{ if .Values.image.digest }}@{{ .Values.image.digest }}{{ end }}
{{- end }}

{{/* certManager is true when cert-manager issues the webhook's certificate; fails on a contradiction. */}}
{{- define "gatefold.certManager" -}}
{{- $cm := .Values.certificates.certManager.enabled -}}
{{- $ss := .Values.certificates.selfSigned.enabled -}}
{{- if and $cm $ss -}}
{{- fail "certificates: certManager.enabled and selfSigned.enabled are both true; enable exactly one" -}}
{{- else if not (or $cm $ss) -}}
{{- fail "certificates: neither certManager.enabled nor selfSigned.enabled is true; enable exactly one" -}}
{{- else if and $ss .Values.certificates.certManager.issuerRef -}}
{{- fail "certificates.certManager.issuerRef is set but selfSigned.enabled is true; unset issuerRef or use certManager" -}}
{{- end -}}
{{- if $cm }}true{{ end -}}
{{- end }}

{{/*
The manager's arguments. An extraArgs entry may not set a flag the chart
sets: it names the value to set instead.
*/}}
{{- define "gatefold.args" -}}
{{- $set := dict
  "leader-elect" "leader election is always on"
  "metrics-bind-address" "the metrics Service and ServiceMonitor need :8443"
  "health-probe-bind-address" "the probes need :8081"
  "webhook-port" "the webhook Service needs 9443"
  "cert-mode" "set certificates.certManager.enabled or certificates.selfSigned.enabled instead"
  "webhook-cert-dir" "cert-manager's Secret is mounted there"
  "listenerset-controllers" "set listenersetControllers instead"
  "pool-sibling-grace" "set poolSiblingGrace instead" -}}
{{- range $arg := .Values.extraArgs }}
{{- $flag := regexReplaceAll "=.*$" (trimPrefix "-" (trimPrefix "-" $arg)) "" }}
{{- with get $set $flag }}
{{- fail (printf "extraArgs: %q sets --%s, which the chart sets: %s" $arg $flag .) }}
{{- end }}
{{- end -}}
- manager
- --leader-elect=true
- --metrics-bind-address=:8443
- --health-probe-bind-address=:8081
- --webhook-port=9443
{{- if include "gatefold.certManager" . }}
- --cert-mode=cert-manager
- --webhook-cert-dir=/etc/gatefold/webhook-cert
{{- else }}
- --cert-mode=self-signed
{{- end }}
{{- with .Values.listenersetControllers }}
- --listenerset-controllers={{ join "," . }}
{{- end }}
{{- with .Values.poolSiblingGrace }}
- --pool-sibling-grace={{ . }}
{{- end }}
{{- range .Values.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
