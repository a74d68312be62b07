package devenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/gatefold/gatefold/api/v1alpha1"
	"github.com/gatefold/gatefold/rules"
)

// klogLine matches kubectl's own log lines (klog headers): noise beside the
// API server's warnings, which stay.
var klogLine = regexp.MustCompile(`(?m)^[IWE]\d{4} .*\n`)

// WriteKubeconfig writes an administrator's kubeconfig to path and returns
// its absolute path.
func (e *Env) WriteKubeconfig(path string) (string, error) {
	kc, err := e.Kubeconfig()
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

// ApplySamples applies the kustomize folder dir (config/samples of the
// repository when empty) with the kubectl beside the control plane, once the
// webhooks answer, then writes to w kubectl's output
// and what the merger made of the samples.
func (e *Env) ApplySamples(ctx context.Context, kubeconfig, dir string, w io.Writer) error {
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return err
		}
		dir = filepath.Join(root, "config", "samples")
	}
	fmt.Fprintf(w, "Applying %s...\n", dir)
	if err := e.waitForWebhooks(ctx); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(e.AssetsDir, "kubectl"), "apply", "--server-side", "-k", dir)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if _, werr := io.WriteString(w, klogLine.ReplaceAllString(string(out), "")); werr != nil {
		return werr
	}
	if err != nil {
		return fmt.Errorf("applying the samples: %w", err)
	}
	return PrintFolds(ctx, e.Client, w)
}

// waitForWebhooks waits, 30s at most, until gatefold's fragment webhooks
// admit a server-side dry run. Applying the samples before would fail half
// way (the Gateway webhook ignores failures, the fragments' do not), and a
// retry would create them in another order than the samples'.
func (e *Env) waitForWebhooks(ctx context.Context) error {
	probe := &v1alpha1.ListenerFragment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "gatefold-dev-probe"},
		Spec: v1alpha1.ListenerFragmentSpec{
			ParentRef: gwv1.ParentGatewayReference{Name: "gatefold-dev-probe"},
			Listeners: []gwv1.ListenerEntry{{Name: "http", Port: 80, Protocol: gwv1.HTTPProtocolType}},
		},
	}
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if err = e.Client.Create(ctx, probe.DeepCopy(), client.DryRunAll); err == nil {
			return nil
		}
	}
	return fmt.Errorf("gatefold's webhooks did not answer within 30s: %w", err)
}

// PrintFolds waits until the merger has reported on every fragment, then
// prints each Gateway's listeners and each fragment's listeners.
func PrintFolds(ctx context.Context, c client.Client, w io.Writer) error {
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
		if c.Reason == string(v1alpha1.FragmentReasonParentNotAccepted) && exists[rules.ParentOf(&lf).String()] {
			return false
		}
	}
	return true
}
