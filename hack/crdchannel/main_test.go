package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStandardDropsExperimentalPropertiesEverywhere(t *testing.T) {
	in := `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
spec:
  group: example.com
  names:
    kind: Thing
    plural: things
  scope: Namespaced
  versions:
  - name: v1
    schema:
      openAPIV3Schema:
        properties:
          spec:
            properties:
              labels:
                additionalProperties:
                  properties:
                    soon:
                      description: <gateway:experimental>
                      type: string
                  type: object
                type: object
              listeners:
                items:
                  properties:
                    filters:
                      description: |-
                        Filters run first.

                        <gateway:experimental>
                      type: object
                    port:
                      description: Port is the port.
                      type: integer
                  required:
                  - filters
                  - port
                  type: object
                type: array
            type: object
        type: object
    served: true
    storage: true
`
	want := strings.NewReplacer(`                    filters:
                      description: |-
                        Filters run first.

                        <gateway:experimental>
                      type: object
`, "", `                  - filters
`, "", `                  properties:
                    soon:
                      description: <gateway:experimental>
                      type: string
`, "").Replace(in)
	got, err := standard([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("standard() (-want +got):\n%s", diff)
	}
}

// TestGeneratedCRDsAreStandard: make manifests ran crdchannel on every CRD
// gatefold ships, so none has a field of the experimental channel.
func TestGeneratedCRDsAreStandard(t *testing.T) {
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("Finding the CRDs: %v", err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), experimental) {
			t.Errorf("%s has a field of Gateway API's experimental channel: run make manifests", f)
		}
	}
}
