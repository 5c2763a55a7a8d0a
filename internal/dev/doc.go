// Package dev is the room of the development-only packages: nothing the
// function runs in FC imports them (internal/app, internal/cli,
// internal/config, internal/logx and internal/transport are the production
// ones). They serve the tests, the end-to-end tests (e2e/) and the tools
// under scripts/:
//
//   - bare: the raw floor the measurements compare with;
//   - modelfake: an OpenAI-compatible model endpoint on loopback;
//   - proc: build the binary, start it, wait for /initialize, stop it;
//   - progress: the tools' progress bar on a terminal;
//   - runtimeapi: a stand-in of FC's go1 runtime API;
//   - testenv: the real MariaDB and Redis of the integration tests.
package dev
