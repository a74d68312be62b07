package merger

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
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

// A tuple moving between Gateways of a fold is taken off the one that
// gives it up before the other, which gives up another, gets it.
func TestPhasesWriteWhatGivesATupleUpFirst(t *testing.T) {
	l := func(name string, port gwv1.PortNumber, host string) gwv1.Listener {
		return gwv1.Listener{Name: gwv1.SectionName(name), Port: port, Protocol: gwv1.HTTPSProtocolType, Hostname: ptr.To(gwv1.Hostname(host))}
	}
	gw := func(name string, ls ...gwv1.Listener) *gwv1.Gateway {
		return &gwv1.Gateway{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: gwv1.GatewaySpec{Listeners: ls}}
	}
	head := gw("shared", l("f", 443, "app.example.com"))
	tests := map[string]struct {
		targets []target
		want    [][]string
	}{
		"a ListenerSet takes the tuple a fragment gave up, and another goes": {targets: []target{
			{key: types.NamespacedName{Name: "shared-listenersets"}, gw: gw("shared-listenersets", l("old", 443, "old.example.com")), managed: sets.New[gwv1.SectionName]("old"),
				head: head, listeners: []gwv1.Listener{l("s", 443, "app.example.com")}},
			{key: types.NamespacedName{Name: "shared"}, gw: head, managed: sets.New[gwv1.SectionName]("f")},
		}, want: [][]string{{"shared"}, {"shared-listenersets"}, nil}},
		"one gives up, one only adds": {targets: []target{
			{key: types.NamespacedName{Name: "shared-listenersets"}, head: head, listeners: []gwv1.Listener{l("s", 443, "app.example.com")}},
			{key: types.NamespacedName{Name: "shared"}, gw: head, managed: sets.New[gwv1.SectionName]("f")},
		}, want: [][]string{{"shared"}, nil, {"shared-listenersets"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got [][]string
			for _, phase := range phases(tc.targets) {
				var names []string
				for _, t := range phase {
					names = append(names, t.key.Name)
				}
				got = append(got, names)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Phases (-want +got):\n%s", diff)
			}
		})
	}
}
