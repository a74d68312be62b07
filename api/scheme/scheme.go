package scheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"

	"github.com/gatefold/gatefold/api/v1alpha1"
)

// New returns a scheme that knows every type gatefold reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		gwv1.Install,
		gwv1beta1.Install,
		v1alpha1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("building scheme: %v", err))
		}
	}
	return s
}
