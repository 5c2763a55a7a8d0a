// Package e2e holds the end-to-end tests: the real binary, built once per
// run, driven over the FC custom-runtime protocol exactly as the platform
// drives it (headers, 404 + x-fc-status), against real MariaDB and Redis,
// the OSS fake, a model fake and webhook receivers. Its helpers start and
// stop processes with internal/dev/proc. Run with the rest of the tests:
// go test -race -count=1 ./...
package e2e
