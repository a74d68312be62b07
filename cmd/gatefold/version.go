package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func versionString() string {
	commit := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				commit = s.Value
			}
		}
	}
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
