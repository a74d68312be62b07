package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// Files serves tls.crt and tls.key from a folder, where the kubelet mounts
// the Secret cert-manager keeps, and reloads them when they change. Until
// both exist it serves nothing and is not ready, instead of exiting.
type Files struct {
	Dir     string
	watcher atomic.Pointer[certwatcher.CertWatcher]
}

var _ Source = &Files{}

func (f *Files) NeedLeaderElection() bool { return false }

func (f *Files) Start(ctx context.Context) error {
	log := logf.FromContext(ctx).WithName("certs")
	cert, key := filepath.Join(f.Dir, corev1.TLSCertKey), filepath.Join(f.Dir, corev1.TLSPrivateKeyKey)
	for waited := time.Duration(0); !exists(cert) || !exists(key); waited += time.Second {
		if waited%time.Minute == 0 {
			log.Info("Waiting for the serving certificate", "certificate", cert, "key", key)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
	w, err := certwatcher.New(cert, key)
	if err != nil {
		return fmt.Errorf("loading the serving certificate from %s: %w", f.Dir, err)
	}
	f.watcher.Store(w)
	log.Info("Serving the certificate from files, reloading them on change", "dir", f.Dir)
	return w.Start(ctx)
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func (f *Files) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if w := f.watcher.Load(); w != nil {
		return w.GetCertificate(hello)
	}
	return nil, errNotLoaded
}

func (f *Files) Ready(*http.Request) error {
	if f.watcher.Load() == nil {
		return errors.Join(errNotLoaded, fmt.Errorf("waiting for %s in %s", corev1.TLSCertKey, f.Dir))
	}
	return nil
}
