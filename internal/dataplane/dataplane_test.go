package dataplane

import (
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "traefik")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		path, env string
		want      string
		noBinary  bool // the error is ErrNoBinary, on which a test skips
	}{
		"the path given wins":                      {path: exe, env: plain, want: exe},
		"the environment's is next":                {env: exe, want: exe},
		"a path that is no executable is an error": {path: plain},
		"a variable naming nothing is an error":    {env: filepath.Join(dir, "missing")},
		"nothing set outside the repository":       {noBinary: true},
	}
	t.Chdir(dir) // outside the repository: no bin/traefik to fall back on
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv(BinaryEnv, tc.env)
			got, err := FindBinary(tc.path)
			switch {
			case tc.want != "":
				if err != nil || got != tc.want {
					t.Errorf("FindBinary = %q, %v; want %q", got, err, tc.want)
				}
			case err == nil:
				t.Errorf("FindBinary = %q, want an error", got)
			case errors.Is(err, ErrNoBinary) != tc.noBinary:
				t.Errorf("FindBinary error %v: ErrNoBinary %v, want %v", err, !tc.noBinary, tc.noBinary)
			case !strings.Contains(err.Error(), "make traefik"):
				t.Errorf("FindBinary error %q does not say to run make traefik", err)
			}
		})
	}
}

func TestEchoAnswersWithItsNameAndTheHost(t *testing.T) {
	url, srv, err := startEcho("checkout")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Errorf("Echo backend at %s, want loopback", url)
	}
	req, err := http.NewRequest(http.MethodGet, url+"/cart", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "checkout.example.com"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if want := "backend=checkout host=checkout.example.com path=/cart\n"; string(body) != want {
		t.Errorf("Echo answered %q, want %q", body, want)
	}
}

// TestConfigStaysOnLoopback reads back the configuration Traefik is given
// by Start for Options without an Address.
func TestConfigStaysOnLoopback(t *testing.T) {
	dir := t.TempDir()
	d := newDataPlane(Options{HTTPPort: 8000, HTTPSPort: 8443, Dir: dir})
	d.Backends["echo"] = "http://127.0.0.1:4242"
	path, err := d.writeConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	var static struct {
		Global      map[string]bool
		EntryPoints map[string]struct{ Address string }
		Providers   struct {
			KubernetesGateway struct{ StatusAddress struct{ IP string } }
			File              struct{ Filename string }
		}
	}
	readYAML(t, path, &static)
	if static.Global["checkNewVersion"] || static.Global["sendAnonymousUsage"] {
		t.Errorf("Traefik may call home: global %v", static.Global)
	}
	if got := static.EntryPoints["web"].Address + " " + static.EntryPoints["websecure"].Address; got != "127.0.0.1:8000 127.0.0.1:8443" {
		t.Errorf("entryPoints web and websecure on %s, want 127.0.0.1:8000 127.0.0.1:8443", got)
	}
	if ip := static.Providers.KubernetesGateway.StatusAddress.IP; ip != "127.0.0.1" {
		t.Errorf("statusAddress.ip %q, want 127.0.0.1", ip)
	}
	var dynamic struct {
		HTTP struct {
			Services map[string]struct {
				LoadBalancer struct{ Servers []struct{ URL string } }
			}
		}
	}
	readYAML(t, static.Providers.File.Filename, &dynamic)
	if s := dynamic.HTTP.Services["echo"].LoadBalancer.Servers; len(s) != 1 || s[0].URL != "http://127.0.0.1:4242" {
		t.Errorf("file provider service echo has servers %+v, want http://127.0.0.1:4242", s)
	}
	if ref := BackendRef("echo"); string(*ref.Group) != "traefik.io" || string(*ref.Kind) != "TraefikService" || ref.Name != "echo@file" {
		t.Errorf("BackendRef(echo) = %+v, want TraefikService echo@file", ref.BackendObjectReference)
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
