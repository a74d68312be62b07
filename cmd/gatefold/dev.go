package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/certs"
	"github.com/gatefold/gatefold/internal/devenv"
	"github.com/gatefold/gatefold/webhook"
)

const devNamespace = "gatefold-system"

var klogLine = regexp.MustCompile(`(?m)^[IWE]\d{4} .*\n`)

func runDev(args []string) error {
	fs := newFlagSet("dev", "Run a local control plane (kube-apiserver and etcd built by `make controlplane`) with the Gateway API and gatefold CRDs, gatefold's webhooks and merger in this process, and the samples applied, until interrupted")
	assets := fs.String("control-plane", "", "Folder holding kube-apiserver, etcd and kubectl (default $KUBEBUILDER_ASSETS, then bin/controlplane)")
	kubeconfigOut := fs.String("kubeconfig-out", filepath.Join("bin", "dev", "kubeconfig"), "Where to write the kubeconfig of the control plane")
	samples := fs.String("samples", "", "Kustomize folder applied once gatefold serves (default config/samples of the repository; \"none\" applies nothing)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	fmt.Println("Starting the control plane...")
	env, err := devenv.Start(devenv.Options{AssetsDir: *assets, Webhooks: true})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("Stopping the control plane...")
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "gatefold: %v\n", err)
		}
	}()
	kubeconfig, err := writeKubeconfig(env, *kubeconfigOut)
	if err != nil {
		return err
	}

	managerDone, err := startDevManager(ctx, env)
	if err != nil {
		return err
	}
	kubectl := filepath.Join(env.AssetsDir, "kubectl")
	if *samples != "none" {
		if err := applySamples(ctx, env, kubectl, kubeconfig, *samples); err != nil {
			return err
		}
	}
	fmt.Printf(`
The control plane is up at %s (Kubernetes v1.37.2, Gateway API standard CRDs,
gatefold CRDs), with gatefold's webhooks and merger running in this process.

Use it with the kubectl built beside it:

  export KUBECONFIG=%s
  %s get listenerfragments -A

Press Ctrl-C to stop; the control plane and its data go with it.
`, env.Config.Host, kubeconfig, kubectl)

	select {
	case <-ctx.Done():
		return <-managerDone
	case err := <-managerDone:
		return err
	}
}

func writeKubeconfig(env *devenv.Env, path string) (string, error) {
	kc, err := env.Kubeconfig()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", fmt.Errorf("creating kubeconfig folder: %w", err)
	}
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		return "", fmt.Errorf("writing kubeconfig: %w", err)
	}
	return filepath.Abs(path)
}

// startDevManager runs one replica, without leader election, serving the
// webhooks the control plane was configured to call.
func startDevManager(ctx context.Context, env *devenv.Env) (<-chan error, error) {
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: devNamespace}}); err != nil {
		return nil, fmt.Errorf("creating namespace %s: %w", devNamespace, err)
	}
	o := managerOptions{
		metrics:     metricsOptions{bindAddress: "0"},
		probeAddr:   "0",
		webhookHost: env.WebhookHost(),
		webhookPort: env.WebhookPort(),
		certDir:     env.WebhookCertDir(), // envtest's, which the API server trusts
		certs:       certOptions{mode: certs.ModeCertManager},
	}
	o.webhook.ClaimsNamespace = devNamespace
	o.webhook.ClaimGrace, o.webhook.CollectPeriod = 30*time.Second, 15*time.Second
	o.merger.ManageReferenceGrants, o.merger.Workers = true, 4
	done := make(chan error, 1)
	go func() { done <- startManager(ctx, env.Config, o) }()
	return done, nil
}

// applySamples applies the samples with kubectl once the webhooks answer,
// then prints what the merger made of them.
func applySamples(ctx context.Context, env *devenv.Env, kubectl, kubeconfig, dir string) error {
	if dir == "" {
		root, err := devenv.RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "config", "samples")
	}
	fmt.Printf("Applying %s...\n", dir)
	var out []byte
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; {
		cmd := exec.CommandContext(ctx, kubectl, "apply", "--server-side", "-k", dir)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		if out, err = cmd.CombinedOutput(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second) // the webhook server may still be starting
	}
	// kubectl's own log lines (klog headers) are noise here; API warnings stay.
	os.Stdout.WriteString(klogLine.ReplaceAllString(string(out), ""))
	if err != nil {
		return fmt.Errorf("applying the samples: %w", err)
	}
	return printFolds(ctx, env.Client, os.Stdout)
}

// printFolds waits until the merger has reported on every fragment, then
// prints each Gateway's listeners and each fragment's listeners.
func printFolds(ctx context.Context, c client.Client, w io.Writer) error {
	fragments := &v1alpha1.ListenerFragmentList{}
	gateways := &gwv1.GatewayList{}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if err := c.List(ctx, fragments); err != nil {
			return fmt.Errorf("listing fragments: %w", err)
		}
		if err := c.List(ctx, gateways); err != nil {
			return fmt.Errorf("listing Gateways: %w", err)
		}
		if allReported(fragments.Items, gateways.Items) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the merger did not report on every fragment within 30s")
		}
	}
	source := map[gwv1.SectionName]string{}
	for _, lf := range fragments.Items {
		for _, l := range lf.Status.Listeners {
			if l.Gateway != nil {
				source[l.Gateway.ListenerName] = fmt.Sprintf("ListenerFragment %s/%s", lf.Namespace, lf.Name)
			}
		}
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, gw := range gateways.Items {
		fmt.Fprintf(tw, "\nGateway %s/%s listeners:\n  NAME\tPORT\tPROTOCOL\tHOSTNAME\tFROM\n", gw.Namespace, gw.Name)
		for _, l := range gw.Spec.Listeners {
			from := source[l.Name]
			if from == "" {
				from = "the Gateway"
			}
			fmt.Fprintf(tw, "  %s\t%d\t%s\t%s\t%s\n", l.Name, l.Port, l.Protocol, ptr.Deref(l.Hostname, ""), from)
		}
	}
	fmt.Fprintf(tw, "\nListenerFragments:\n  FRAGMENT\tLISTENER\tACCEPTED\tREASON\tMESSAGE\n")
	for _, lf := range fragments.Items {
		if c := meta.FindStatusCondition(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted)); len(lf.Status.Listeners) == 0 && c != nil {
			fmt.Fprintf(tw, "  %s/%s\t\t%s\t%s\t%s\n", lf.Namespace, lf.Name, c.Status, c.Reason, c.Message)
		}
		for _, l := range lf.Status.Listeners {
			c := meta.FindStatusCondition(l.Conditions, string(gwv1.ListenerEntryConditionAccepted))
			fmt.Fprintf(tw, "  %s/%s\t%s\t%s\t%s\t%s\n", lf.Namespace, lf.Name, l.Name, c.Status, c.Reason, c.Message)
		}
	}
	return tw.Flush()
}

// allReported says whether the merger has reported on every fragment since
// its Gateway appeared: the samples create fragments before their Gateway.
func allReported(fragments []v1alpha1.ListenerFragment, gateways []gwv1.Gateway) bool {
	exists := map[string]bool{}
	for _, gw := range gateways {
		exists[gw.Namespace+"/"+gw.Name] = true
	}
	for _, lf := range fragments {
		c := meta.FindStatusCondition(lf.Status.Conditions, string(v1alpha1.FragmentConditionAccepted))
		if c == nil || c.Status == metav1.ConditionUnknown || c.ObservedGeneration != lf.Generation {
			return false
		}
		if c.Reason == string(v1alpha1.FragmentReasonParentNotAccepted) && exists[webhook.ParentOf(&lf).String()] {
			return false
		}
	}
	return true
}
