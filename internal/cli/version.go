package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
)

func setupVersion(*flag.FlagSet) action {
	return func(_ context.Context, r *run) int {
		info, ok := debug.ReadBuildInfo()
		if !ok {
			fmt.Fprintln(r.stderr, "version: the binary carries no build information (built without module support)")
			return ExitFailed
		}
		writeVersion(r.stdout, info)
		return ExitOK
	}
}

// writeVersion prints the module, its version ("(devel)" for a build from a
// checkout) and the VCS stamp go build puts in the binary (absent with
// -buildvcs=false or outside a repository: said so).
func writeVersion(w io.Writer, info *debug.BuildInfo) {
	fmt.Fprintf(w, "%s %s\n", info.Main.Path, info.Main.Version)
	fmt.Fprintf(w, "go        %s\n", info.GoVersion)
	vcs := map[string]string{}
	for _, s := range info.Settings {
		vcs[s.Key] = s.Value
	}
	if vcs["vcs.revision"] == "" {
		fmt.Fprintln(w, "revision  unknown (built without VCS information)")
		return
	}
	fmt.Fprintf(w, "revision  %s (%s)\n", vcs["vcs.revision"], vcs["vcs"])
	if t := vcs["vcs.time"]; t != "" {
		fmt.Fprintf(w, "committed %s\n", t)
	}
	if vcs["vcs.modified"] == "true" {
		fmt.Fprintln(w, "modified  true (uncommitted changes in the build)")
	}
}
