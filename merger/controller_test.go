package merger

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

func TestListenersChanged(t *testing.T) {
	l := func(name string, port gwv1.PortNumber) gwv1.Listener {
		return gwv1.Listener{Name: gwv1.SectionName(name), Port: port, Protocol: gwv1.HTTPProtocolType}
	}
	gw := &gwv1.Gateway{Spec: gwv1.GatewaySpec{Listeners: []gwv1.Listener{l("own", 80), l("a", 81), l("b", 82)}}}
	tests := map[string]struct {
		managed []gwv1.SectionName
		desired []gwv1.Listener
		want    bool
	}{
		"the Gateway holds exactly the fold":     {managed: []gwv1.SectionName{"a", "b"}, desired: []gwv1.Listener{l("b", 82), l("a", 81)}},
		"a listener changed":                     {managed: []gwv1.SectionName{"a", "b"}, desired: []gwv1.Listener{l("a", 81), l("b", 83)}, want: true},
		"a listener is no longer wanted":         {managed: []gwv1.SectionName{"a", "b"}, desired: []gwv1.Listener{l("a", 81)}, want: true},
		"a listener is new":                      {managed: []gwv1.SectionName{"a"}, desired: []gwv1.Listener{l("a", 81), l("c", 84)}, want: true},
		"an equal listener someone else applied": {managed: []gwv1.SectionName{"a", "x"}, desired: []gwv1.Listener{l("a", 81), l("b", 82)}, want: true},
		"nothing wanted, nothing managed":        {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := listenersChanged(gw, sets.New(tc.managed...), tc.desired); got != tc.want {
				t.Errorf("listenersChanged = %v, want %v", got, tc.want)
			}
		})
	}
}
