// Command main is the idemgate function: `main serve`, or no arguments inside
// FC (an FC_* runtime variable set), serves FC (the go1 runtime when
// FC_RUNTIME_API is set, else the custom-runtime HTTP protocol); with another
// subcommand it is the operator's tool (main -h). Wiring only: the work lives
// in handler/, idempotency/ and ossresult/.
package main

import (
	"os"

	"github.com/idemgate/idemgate/internal/cli"
)

func main() { os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr)) }
