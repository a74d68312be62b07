package webhook

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// gatewayValidator warns, and never denies, when a Gateway's own listener
// takes a tuple that a fragment's listener wants: the Gateway's listeners come
// first, so that fragment listener will be reported Conflicted.
type gatewayValidator struct {
	cache client.Reader
}

func (v *gatewayValidator) ValidateCreate(ctx context.Context, gw *gwv1.Gateway) (admission.Warnings, error) {
	return v.warn(ctx, gw), nil
}

func (v *gatewayValidator) ValidateUpdate(ctx context.Context, _, gw *gwv1.Gateway) (admission.Warnings, error) {
	return v.warn(ctx, gw), nil
}

func (v *gatewayValidator) ValidateDelete(context.Context, *gwv1.Gateway) (admission.Warnings, error) {
	return nil, nil
}

func (v *gatewayValidator) warn(ctx context.Context, gw *gwv1.Gateway) admission.Warnings {
	fragments, err := fragmentsOf(ctx, v.cache, gw)
	if err != nil {
		return admission.Warnings{fmt.Sprintf("gatefold could not check this Gateway's listeners against its ListenerFragments: %v", err)}
	}
	wanted := map[Tuple]int{}
	for _, lf := range fragments {
		for _, l := range lf.Spec.Listeners {
			wanted[TupleOf(l.Port, l.Protocol, l.Hostname)]++
		}
	}
	var warnings admission.Warnings
	for _, i := range OwnListenerIndexes(gw, fragments) {
		l := gw.Spec.Listeners[i]
		if n := wanted[TupleOf(l.Port, l.Protocol, l.Hostname)]; n > 0 {
			warnings = append(warnings, fmt.Sprintf("spec.listeners[%d] (%q) takes %s, which %d ListenerFragment listener(s) also want: the Gateway's own listener wins and those are reported Conflicted",
				i, l.Name, TupleOf(l.Port, l.Protocol, l.Hostname), n))
		}
	}
	return warnings
}
