// Command gen writes s.yaml, template.yml and s.local.yaml from the
// description in package deploy. Run it with `go generate ./deploy/` (or
// `go generate ./...`) from the repository root.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/idemgate/idemgate/deploy"
)

func main() {
	root := flag.String("root", "..", "repository root (go generate runs in deploy/)")
	flag.Parse()
	files, err := deploy.Files()
	if err == nil {
		err = deploy.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "deploy/gen:", err)
		os.Exit(1)
	}
	for _, f := range files {
		fmt.Printf("wrote %s (%d bytes)\n", f.Name, len(f.Data))
	}
}
