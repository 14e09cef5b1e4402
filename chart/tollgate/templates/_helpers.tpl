{{/* The name of every object: the release name (install as `helm install tollgate ...`). */}}
{{- define "tollgate.fullname" -}}
{{- .Release.Name | trunc 53 | trimSuffix "-" -}}
{{- end -}}

{{/* The governed domains as a CEL list literal, e.g. ['tollgate.io']. */}}
{{- define "tollgate.governedDomains" -}}
{{- $quoted := list -}}
{{- range .Values.admission.governedDomains -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$" .) -}}
{{- fail (printf "admission.governedDomains: %q is not a DNS domain" .) -}}
{{- end -}}
{{- $quoted = append $quoted (printf "'%s'" .) -}}
{{- end -}}
{{- if eq (len $quoted) 0 -}}
{{- fail "admission.governedDomains: name at least one domain (tollgate.io by default)" -}}
{{- end -}}
[{{ join ", " $quoted }}]
{{- end -}}
