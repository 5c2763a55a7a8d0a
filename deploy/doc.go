// Package deploy is the one description of the deployed function (spec.go)
// and the generator of the files that deploy it: s.yaml (Serverless Devs,
// fc3 component), template.yml (ROS: the function, its role, its logstore
// with the index and the alerts of deploy/logq, and the results bucket with
// its lifecycle rule; observe.go) and s.local.yaml (the same function for
// `s local invoke`, with Docker alone). Edit spec.go, then
// run `go generate ./deploy/`; the tests fail while a committed file differs
// from what the generator writes.
//
// The tests also check the description against the code (every variable
// config.Load reads is set or deliberately left to the platform, the port,
// the trigger events the handler accepts, retries against MAX_ATTEMPTS,
// timeouts against the model call and the lease, a least-privilege role),
// that scripts/build.sh produces the zip FC runs, and emulate
// `s local invoke` on that zip.
package deploy

//go:generate go run ./gen
