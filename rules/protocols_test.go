package rules_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"testing"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/rules"
)

// TestEveryUpstreamProtocolHasAGroup reads the ProtocolType constants of the
// gateway-api module go.mod requires: a release that adds a listener
// protocol fails here until the port groups know it.
func TestEveryUpstreamProtocolHasAGroup(t *testing.T) {
	root, err := devenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	module, err := devenv.GatewayAPIModuleDir(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(module, "apis", "v1")
	files, err := filepath.Glob(filepath.Join(dir, "*_types.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("Finding the API types in %s: %v", dir, err)
	}
	var found []string
	for _, path := range files {
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatalf("Parsing %s: %v", path, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			spec, ok := n.(*ast.ValueSpec)
			if !ok || spec.Type == nil || len(spec.Values) != 1 {
				return true
			}
			if id, ok := spec.Type.(*ast.Ident); !ok || id.Name != "ProtocolType" {
				return true
			}
			lit, ok := spec.Values[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			p, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatal(err)
			}
			found = append(found, p)
			if g := rules.GroupOf(gwv1.ProtocolType(p)); g == rules.GroupCustom {
				t.Errorf("Listener protocol %q of Gateway API is in no port group: add it to GroupOf", p)
			}
			return true
		})
	}
	if len(found) < 5 {
		t.Fatalf("Found the listener protocols %v in %s, want HTTP, HTTPS, TLS, TCP and UDP at least", found, dir)
	}
}
