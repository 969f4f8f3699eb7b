{{/* The chart's name, or nameOverride. */}}
{{- define "notifier.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The name of every object: the release's name, with the chart's unless it holds it already. */}}
{{- define "notifier.fullname" -}}
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

{{- define "notifier.selectorLabels" -}}
app.kubernetes.io/name: {{ include "notifier.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "notifier.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "notifier.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "notifier.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "notifier.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret the settings come from: existingSecret, the chart's own, or none (""). */}}
{{- define "notifier.secretName" -}}
{{- if .Values.existingSecret }}
{{- .Values.existingSecret }}
{{- else if .Values.secrets }}
{{- include "notifier.fullname" . }}
{{- end }}
{{- end }}

{{/* A value as the text of a variable: strings as they are, numbers and booleans as JSON writes them
(toString would write 1000000 as 1e+06). */}}
{{- define "notifier.text" -}}
{{- if kindIs "string" . }}{{ . }}{{ else }}{{ toJson . }}{{ end }}
{{- end }}

{{/* NOTIFIER_REDIS_URL: redis.url with the password from the Secret put in (Kubernetes expands
$(REDIS_PASSWORD) from the variable defined before it). */}}
{{- define "notifier.redisUrl" -}}
{{- $url := .Values.redis.url }}
{{- if not .Values.redis.passwordKey }}
{{- $url }}
{{- else if hasPrefix "unix://" $url }}
{{- printf "%s%spassword=$(REDIS_PASSWORD)" $url (ternary "&" "?" (contains "?" $url)) }}
{{- else if $url }}
{{- regexReplaceAll "^(rediss?://)" $url "${1}:$(REDIS_PASSWORD)@" }}
{{- else if .Values.redis.sentinels }}
{{- print "redis://:$(REDIS_PASSWORD)@/0" }}
{{- end }}
{{- end }}

{{/* The variables the chart sets from its own values, as a YAML map. */}}
{{- define "notifier.chartEnv" -}}
NOTIFIER_HOST: "0.0.0.0"
NOTIFIER_PORT: {{ .Values.containerPort | quote }}
NOTIFIER_CONFIG: /etc/notifier/config.yaml
{{- with include "notifier.redisUrl" . }}
NOTIFIER_REDIS_URL: {{ . | quote }}
{{- end }}
{{- if .Values.redis.cluster }}
NOTIFIER_REDIS_CLUSTER: "true"
{{- end }}
{{- with .Values.redis.sentinels }}
NOTIFIER_REDIS_SENTINELS: {{ join "," . | quote }}
NOTIFIER_REDIS_SENTINEL_MASTER: {{ $.Values.redis.sentinelMaster | quote }}
{{- end }}
NOTIFIER_REDIS_MIN_REPLICAS: {{ .Values.redis.minReplicas | quote }}
{{- /* what the local limiter divides the limits by while the store is down (fail_open) */}}
NOTIFIER_REPLICAS: {{ ternary .Values.autoscaling.maxReplicas .Values.replicaCount .Values.autoscaling.enabled | quote }}
NOTIFIER_WORKERS: {{ include "notifier.text" .Values.workers | quote }}
{{- end }}

{{/* env and extraEnv as one list of EnvVar objects. */}}
{{- define "notifier.userEnv" -}}
{{- range $name := keys .Values.env | sortAlpha }}
- name: {{ $name }}
  value: {{ include "notifier.text" (get $.Values.env $name) | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The container's env: the Redis password first (the URL refers to it), the chart's variables
that env and extraEnv do not name, then those. */}}
{{- define "notifier.env" -}}
{{- $user := include "notifier.userEnv" . | fromYamlArray }}
{{- $named := list }}
{{- range $user }}{{ $named = append $named .name }}{{ end }}
{{- if .Values.redis.passwordKey }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "notifier.secretName" . }}
      key: {{ .Values.redis.passwordKey }}
{{- end }}
{{- $chart := include "notifier.chartEnv" . | fromYaml }}
{{- range $name := list "NOTIFIER_HOST" "NOTIFIER_PORT" "NOTIFIER_CONFIG" "NOTIFIER_REDIS_URL" "NOTIFIER_REDIS_CLUSTER" "NOTIFIER_REDIS_SENTINELS" "NOTIFIER_REDIS_SENTINEL_MASTER" "NOTIFIER_REDIS_MIN_REPLICAS" "NOTIFIER_REPLICAS" "NOTIFIER_WORKERS" }}
{{- if and (hasKey $chart $name) (not (has $name $named)) }}
- name: {{ $name }}
  value: {{ get $chart $name | quote }}
{{- end }}
{{- end }}
{{- with $user }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Ports the gateway may reach Redis on: networkPolicy.redisPorts and those in the Redis values. */}}
{{- define "notifier.redisPorts" -}}
{{- $ports := list }}
{{- range .Values.networkPolicy.redisPorts }}{{ $ports = append $ports (int .) }}{{ end }}
{{- $url := .Values.redis.url }}
{{- if regexMatch "^rediss?://" $url }}
{{- $port := regexReplaceAll "^rediss?://(?:[^@/]*@)?(?:\\[[^\\]]*\\]|[^:/?]*)(?::([0-9]+))?.*$" $url "${1}" }}
{{- $ports = append $ports (int (default "6379" $port)) }}
{{- end }}
{{- range .Values.redis.sentinels }}
{{- $ports = append $ports (int (regexReplaceAll "^.*:" . "")) }}
{{- end }}
{{- toJson ($ports | uniq) }}
{{- end }}

{{/* Values that cannot work together where values.schema.json cannot say so: refused with a message.
(helm lint turns fail off: helm template and install refuse them.) */}}
{{- define "notifier.validate" -}}
{{- if .Values.redis.passwordKey }}
{{- if not (or .Values.existingSecret (hasKey .Values.secrets .Values.redis.passwordKey)) }}
{{- fail (printf "redis.passwordKey: %q is not a key of secrets (and existingSecret is not set)" .Values.redis.passwordKey) }}
{{- end }}
{{- if not (or .Values.redis.url .Values.redis.sentinels) }}
{{- fail "redis.passwordKey: set redis.url or redis.sentinels too" }}
{{- end }}
{{- if contains "@" .Values.redis.url }}
{{- fail "redis.url holds credentials: with redis.passwordKey leave them out of it" }}
{{- end }}
{{- end }}
{{- if and .Values.autoscaling.enabled (lt (int .Values.autoscaling.maxReplicas) (int .Values.autoscaling.minReplicas)) }}
{{- fail "autoscaling.maxReplicas is below autoscaling.minReplicas" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (not (or .Values.autoscaling.targetCPUUtilizationPercentage .Values.autoscaling.targetMemoryUtilizationPercentage)) }}
{{- fail "autoscaling: set targetCPUUtilizationPercentage or targetMemoryUtilizationPercentage" }}
{{- end }}
{{- if and (ne (toString .Values.workers) "1") (not (or .Values.redis.url .Values.redis.sentinels)) }}
{{- fail "workers: more than 1 needs redis.url or redis.sentinels (the embedded store lives in one process)" }}
{{- end }}
{{- if lt (int .Values.terminationGracePeriodSeconds) (add (int .Values.preStopSleepSeconds) 20 | int) }}
{{- fail (printf "terminationGracePeriodSeconds must be at least preStopSleepSeconds + 20 (%d): the gateway's shutdown after SIGTERM takes up to 20 s" (add (int .Values.preStopSleepSeconds) 20)) }}
{{- end }}
{{- end }}
