// Command gatefold folds ListenerFragments into Gateway listeners. One binary
// serves every role: `manager` in a cluster, `dev` on a local control plane.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

// command is one subcommand: its flags are parsed from the arguments after
// its name.
type command struct {
	name    string
	summary string
	run     func(args []string) error
}

func commands() []command {
	return []command{
		{"manager", "Run the webhook server and the leader-elected merger against a cluster", runManager},
		{"dev", "Run a local control plane with gatefold's CRDs until interrupted", runDev},
		{"version", "Print gatefold's version", runVersion},
	}
}

func main() {
	if err := run(os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "gatefold: %v\n", err)
		os.Exit(1)
	}
}

func run(args []string, usageOut io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(usageOut)
		if len(args) == 0 {
			return fmt.Errorf("no command given")
		}
		return nil
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(args[1:])
			if err == flag.ErrHelp {
				return nil
			}
			return err
		}
	}
	usage(usageOut)
	return fmt.Errorf("unknown command %q", args[0])
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Usage: gatefold <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun `gatefold <command> -h` for a command's flags.")
}

// newFlagSet returns a flag set for a subcommand that prints its own usage.
func newFlagSet(name, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet("gatefold "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: gatefold %s [flags]\n\n%s.\n\nFlags:\n", name, summary)
		fs.PrintDefaults()
	}
	return fs
}
