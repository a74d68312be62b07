package main

import (
	"fmt"
	"runtime"
)

// version and commit are set at build time, as make build and make image do:
// -ldflags "-X main.version=<git describe> -X main.commit=<revision>".
var (
	version = "dev"
	commit  = "unknown"
)

func versionString() string {
	return fmt.Sprintf("gatefold %s (commit %s, %s, %s/%s)", version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func runVersion(args []string) error {
	fs := newFlagSet("version", "Print gatefold's version")
	if err := fs.Parse(args); err != nil {
		return err
	}
	fmt.Println(versionString())
	return nil
}
