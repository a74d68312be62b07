#!/usr/bin/env bash
# Removes what gatefold made outside its own namespace, once gatefold is
# uninstalled (its overlay deleted): `make undeploy` runs it after
# `kubectl delete -k`, and a kubectl-only install runs it the same way
# (docs/operations.md, "Uninstall"). KUBECTL names the kubectl (default
# kubectl); it acts on the current context of your kubeconfig.
#
# - the derived routes (named gf-… and controlled by a route), which their
#   user routes own, so they outlive gatefold;
# - the Gateways gatefold created beside a Gateway, for its pool or its
#   ListenerSets, which that Gateway owns: labelled gatefold.dev/pool-head and
#   controlled by a Gateway, never a Gateway that only carries the label;
# - the listeners gatefold folded into other Gateways, the count of their
#   ListenerSets in their status, and the status of ListenerSets: it releases
#   what field manager gatefold applied, so that what gatefold alone wrote goes
#   (a ListenerSet's status is the CRD's default Pending again);
# - the ReferenceGrants gatefold keeps for ListenerSets.
set -euo pipefail

kubectl=${KUBECTL:-kubectl}
gateway_api=gateway.networking.k8s.io

if "$kubectl" get crd listenerfragments.gatefold.dev >/dev/null 2>&1; then
	echo "gatefold is still installed (CRD listenerfragments.gatefold.dev exists), and would make again what this removes: delete its overlay first (kubectl delete -k config/<overlay>), or with Helm, after helm uninstall: kubectl delete crd listenerfragments.gatefold.dev" >&2
	exit 1
fi
served=$("$kubectl" api-resources --api-group="$gateway_api" -o name)
if [ -z "$served" ]; then
	echo "No Gateway API resources are served: gatefold left nothing."
	exit 0
fi

# A derived route is named gf-… and controlled by a route (of its kind): a
# user's copy that kept the labels is not one.
derived='{{range .items}}{{$r := .}}{{range .metadata.ownerReferences}}{{if .controller}}'\
'{{$r.metadata.namespace}} {{$r.metadata.name}} {{.kind}} {{$r.kind}}{{"\n"}}{{end}}{{end}}{{end}}'
for r in $(grep -E '^[a-z]+routes\.' <<<"$served"); do
	"$kubectl" get "$r" -A -l gatefold.dev/derived=true,app.kubernetes.io/managed-by=gatefold -o go-template="$derived" |
		while read -r ns name owner kind; do
			if [[ $name == gf-* && $owner == "$kind" ]]; then
				"$kubectl" delete "$r" -n "$ns" "$name" --ignore-not-found
			fi
		done
done

controlled='{{range .items}}{{$gw := .}}{{range .metadata.ownerReferences}}{{if and .controller (eq .kind "Gateway")}}'\
'{{$gw.metadata.namespace}} {{$gw.metadata.name}}{{"\n"}}{{end}}{{end}}{{end}}'
"$kubectl" get "gateways.$gateway_api" -A -l gatefold.dev/pool-head -o go-template="$controlled" |
	while read -r ns name; do
		"$kubectl" delete "gateways.$gateway_api" -n "$ns" "$name" --ignore-not-found
	done

# Releases what field manager gatefold applied to the objects of resource
# $1, spec and status: an apply of no fields takes off those it alone wrote.
release() {
	local applied='{{range .items}}{{$o := .}}{{range .metadata.managedFields}}'\
'{{if and (eq .manager "gatefold") (eq .operation "Apply")}}'\
'{{$o.metadata.namespace}} {{$o.metadata.name}} {{or .subresource "-"}}{{"\n"}}{{end}}{{end}}{{end}}'
	local kind=$2
	"$kubectl" get "$1" -A --show-managed-fields -o go-template="$applied" |
		while read -r ns name sub; do
			local flags=()
			[ "$sub" = - ] || flags=(--subresource="$sub")
			printf 'apiVersion: %s/v1\nkind: %s\nmetadata:\n  namespace: %s\n  name: %s\n' "$gateway_api" "$kind" "$ns" "$name" |
				"$kubectl" apply --server-side --field-manager=gatefold "${flags[@]}" -f - ||
				echo "$kind $ns/$name keeps what gatefold wrote ($sub): remove it with kubectl edit" >&2
		done
}
release "gateways.$gateway_api" Gateway
if grep -qx "listenersets.$gateway_api" <<<"$served"; then
	release "listenersets.$gateway_api" ListenerSet
fi

if grep -qx "referencegrants.$gateway_api" <<<"$served"; then
	"$kubectl" delete "referencegrants.$gateway_api" -A -l app.kubernetes.io/managed-by=gatefold --ignore-not-found
fi
