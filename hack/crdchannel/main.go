// Command crdchannel keeps the CRDs it is given on Gateway API's standard
// channel: it removes every schema property whose description carries
// upstream's <gateway:experimental> marker, as upstream's standard CRDs omit
// them. gatefold's types embed upstream's, which hold both channels' fields.
//
//	go run ./hack/crdchannel FILE...
//
// Each file is rewritten in place; make manifests runs it after controller-gen.
package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// experimental marks a field of upstream's experimental channel.
const experimental = "<gateway:experimental>"

func main() {
	for _, path := range os.Args[1:] {
		if err := rewrite(path); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

// rewrite removes the experimental properties of the CRD in path.
func rewrite(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := standard(in)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, out, 0o644)
}

// standard returns the CRD in with every experimental property removed, laid
// out as controller-gen writes it (no status).
func standard(in []byte) ([]byte, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(bytes.TrimPrefix(in, []byte("---\n")), crd); err != nil {
		return nil, fmt.Errorf("decoding the CRD: %w", err)
	}
	for i := range crd.Spec.Versions {
		if v := crd.Spec.Versions[i].Schema; v != nil {
			prune(v.OpenAPIV3Schema)
		}
	}
	out, err := yaml.Marshal(struct {
		metav1.TypeMeta `json:",inline"`
		Metadata        metav1.ObjectMeta                            `json:"metadata"`
		Spec            apiextensionsv1.CustomResourceDefinitionSpec `json:"spec"`
	}{crd.TypeMeta, crd.ObjectMeta, crd.Spec})
	if err != nil {
		return nil, fmt.Errorf("encoding the CRD: %w", err)
	}
	return append([]byte("---\n"), out...), nil
}

// prune drops, everywhere under s, the properties whose schema is
// experimental, and their names from `required`.
func prune(s *apiextensionsv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	for name, p := range s.Properties {
		if strings.Contains(p.Description, experimental) {
			delete(s.Properties, name)
			s.Required = slices.DeleteFunc(s.Required, func(r string) bool { return r == name })
			continue
		}
		prune(&p)
		s.Properties[name] = p
	}
	if s.Items != nil {
		prune(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			prune(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		prune(s.AdditionalProperties.Schema)
	}
	for _, group := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range group {
			prune(&group[i])
		}
	}
	prune(s.Not)
	for name, p := range s.PatternProperties {
		prune(&p)
		s.PatternProperties[name] = p
	}
}
