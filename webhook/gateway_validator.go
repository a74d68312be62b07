package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/claims"
	"github.com/gatefold/gatefold/rules"
)

// gatewayValidator warns, and never denies, when a Gateway's own listener
// conflicts with a listener of a fragment (or of a ListenerSet gatefold
// folds) the Gateway admits: the Gateway's listeners come first, so that
// listener will be reported Conflicted.
type gatewayValidator struct {
	cache                  client.Reader
	listenerSetControllers sets.Set[string]
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
	if byGatefold(ctx) {
		return nil
	}
	var warnings admission.Warnings
	if mark, ok := gw.Annotations[v1alpha1.PoolAnnotation]; ok && !rules.PoolHead(gw) {
		warnings = append(warnings, fmt.Sprintf("metadata.annotations[%s] is %q: only \"true\" makes this Gateway the head of a pool, so gatefold treats it as unmarked", v1alpha1.PoolAnnotation, mark))
	}
	fragments, err := fragmentsOf(ctx, v.cache, gw)
	var placed, listenerSets []rules.Source
	if err == nil {
		listenerSets, err = listenerSetsOf(ctx, v.cache, v.listenerSetControllers, gw)
		fragments = append(fragments, listenerSets...)
	}
	if err == nil {
		placed, err = claims.NewView(v.cache).Placed(ctx, gw, fragments)
	}
	if err != nil {
		logf.FromContext(ctx).Error(err, "Checking a Gateway's listeners against its ListenerFragments", "gateway", klog.KObj(gw))
		return append(warnings, "gatefold could not check this Gateway's listeners against its ListenerFragments: gatefold's log has the details")
	}
	own := sets.New[gwv1.SectionName]()
	for _, l := range rules.OwnListeners(gw, rules.ManagedListeners(gw), fragments) {
		own.Insert(l.Name)
	}
	for i, l := range gw.Spec.Listeners {
		if !own.Has(l.Name) {
			continue
		}
		h := rules.Holder{Listener: l.Name, Entry: rules.EntryOf(l.Port, l.Protocol, l.Hostname)}
		n := map[string]int{}
		for _, src := range placed {
			for _, e := range src.Listeners {
				if rules.ConflictOf(entryOf(e), h) != nil {
					n[src.Kind]++
				}
			}
		}
		var counts []string
		for _, kind := range []string{rules.KindListenerFragment, rules.KindListenerSet} {
			if n[kind] > 0 {
				counts = append(counts, fmt.Sprintf("%d %s", n[kind], kind))
			}
		}
		if len(counts) > 0 {
			warnings = append(warnings, fmt.Sprintf("spec.listeners[%d] (%q, %s) conflicts with %s listener(s): the Gateway's own listener wins and those are reported Conflicted",
				i, l.Name, h.Entry, strings.Join(counts, " and ")))
		}
	}
	return warnings
}

// byGatefold says whether the request is a write with gatefold's field
// manager, whose conflicts the merger reports on the fragments. The webhook's
// matchCondition skips gatefold's ServiceAccount; this skips gatefold run as
// anyone else (`gatefold dev`).
func byGatefold(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	if err != nil || len(req.Options.Raw) == 0 {
		return false
	}
	var opts struct {
		FieldManager string `json:"fieldManager"`
	}
	return json.Unmarshal(req.Options.Raw, &opts) == nil && opts.FieldManager == v1alpha1.FieldManager
}
