package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// envDoc documents one environment variable.
type envDoc struct{ name, doc string }

// envDocs are the variables the binary reads (internal/config and this
// package), in the order the usage lists them.
var envDocs = []envDoc{
	{"MYSQL_DSN", "MySQL/MariaDB DSN of the arbiter store, user:pass@tcp(host:3306)/db; unset: the embedded store under STATE_DIR"},
	{"STATE_DIR", "directory of the embedded store and of local results (default ./.idemgate)"},
	{"REDIS_URL", "redis://[:pass@]host:6379/db of the fast layer (optional; unset: none)"},
	{"REDIS_KEY_PREFIX", "prefix of every fast-layer key (keys are <prefix>idem:{K}), at most 64 of A-Z a-z 0-9 : . _ - (default empty); sets apart deployments sharing one Redis database"},
	{"DEDUP_TTL_SECONDS", "how long the fast layer remembers a key, 1 to 300 (default 300)"},
	{"OSS_ENDPOINT", "OSS endpoint for results; OSS_ENDPOINT, OSS_BUCKET and OSS_REGION all or none (none: STATE_DIR/results)"},
	{"OSS_BUCKET", "OSS bucket for results"},
	{"OSS_REGION", "OSS region, for V4 signing (cn-hangzhou …)"},
	{"ALIBABA_CLOUD_ACCESS_KEY_ID", "fallback credentials for OSS when FC sends none (local runs)"},
	{"ALIBABA_CLOUD_ACCESS_KEY_SECRET", "secret of the fallback credentials"},
	{"ALIBABA_CLOUD_SECURITY_TOKEN", "STS token of the fallback credentials"},
	{"LLM_BASE_URL", "OpenAI-compatible endpoint of the model (default DashScope's compatible mode)"},
	{"LLM_API_KEY", "model API key; unset with LLM_MODEL unset: the offline model"},
	{"DASHSCOPE_API_KEY", "read when LLM_API_KEY is unset"},
	{"LLM_MODEL", "model name (default qwen-plus with a key, but invoke stays offline unless LLM_MODEL names a model; \"offline\": the built-in offline model)"},
	{"LLM_TIMEOUT_SECONDS", "bound of one model call, 1 to 3600 (default 60)"},
	{"LEASE_SECONDS", "lease of a claim, renewed while the task runs, 1 to 86400 (default 60)"},
	{"MAX_ATTEMPTS", "attempts before a retryable failure is final, 1 to 100 (default 3)"},
	{"WAIT_IN_FLIGHT_SECONDS", "a duplicate meeting a live lease waits up to this for its result, 0 to 86400 (default 0: answer in progress at once); never past the invocation's deadline, billed while it waits"},
	{"LOCAL_CACHE_SIZE", "final answers each instance keeps in memory, 0 to 1000000 (default 0: off); a replay's reset is seen by other instances only after LOCAL_CACHE_TTL_SECONDS"},
	{"LOCAL_CACHE_TTL_SECONDS", "how long a cached final answer stays, 1 to 300 (default 60)"},
	{"NOTIFY_ALLOWED_HOSTS", "hosts notify.url may name, comma-separated ([http://]host[:port][;private][;loopback]); unset: every notify refused"},
	{"NOTIFY_SIGNING_SECRET", "HMAC key of the Idemgate-Signature header on every notify, at least 32 characters (unset: unsigned)"},
	{"RETENTION_DAYS", "days a finished record stays after its last change, 8 to 3650 (default 30); then its tombstone answers duplicates until its objects expired"},
	{"STATS_RETENTION_DAYS", "days the per-minute stats stay, 1 to 3650 (default 30)"},
	{"OBJECT_EXPIRE_DAYS", "days input.json and attempt outputs live (the bucket's lifecycle rule), 2 to 3650 (default 30): inputs must outlive FC's redeliveries; a purged key keeps a tombstone 2 days longer"},
	{"FC_CUSTOM_LISTEN_PORT", "port of the custom-runtime server (FC sets it; else FC_SERVER_PORT, else 9000)"},
	{"FC_SERVER_PORT", "port of the custom-runtime server when FC_CUSTOM_LISTEN_PORT is unset"},
	{"FC_RUNTIME_API", "set by FC's go1 runtime: serve through its runtime API instead of HTTP"},
	{"KEY_FALLBACK", "strict (default): refuse events without tenant_id or operation (or whose KEY_JMESPATH/PAYLOAD_JMESPATH selects nothing); fingerprint: key them by their data"},
	{"KEY_JMESPATH", "JMESPath over the event data selecting the business key, e.g. [tenant_id, input.order_id] (default: docs/design.md §4); a bad expression stops the start"},
	{"PAYLOAD_JMESPATH", "JMESPath over the event data selecting what a repeat must match to be a duplicate (default: task_type, operation, input_version)"},
	{"IDEMPOTENCY_DISABLED", "true: run every task without idempotency (tests only; refused where IDEMGATE_ENV=production)"},
	{"IDEMGATE_ENV", "production marks a deployed function (the deploy files set it): IDEMPOTENCY_DISABLED is refused there"},
	{"IDEMGATE_FAULT", "crash drills only: a pipeline point where the process kills itself (POINT or POINT:panic)"},
}

// Variable groups, as the commands use them.
var (
	envStore   = []string{"MYSQL_DSN", "STATE_DIR"}
	envFast    = []string{"REDIS_URL", "REDIS_KEY_PREFIX", "DEDUP_TTL_SECONDS"}
	envResults = []string{"OSS_ENDPOINT", "OSS_BUCKET", "OSS_REGION", "ALIBABA_CLOUD_ACCESS_KEY_ID",
		"ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALIBABA_CLOUD_SECURITY_TOKEN"}
	envModel     = []string{"LLM_BASE_URL", "LLM_API_KEY", "DASHSCOPE_API_KEY", "LLM_MODEL", "LLM_TIMEOUT_SECONDS"}
	envRetention = []string{"RETENTION_DAYS", "STATS_RETENTION_DAYS", "OBJECT_EXPIRE_DAYS"}
	envPipeline  = join(envStore, envFast, envResults, envModel, []string{"LEASE_SECONDS", "MAX_ATTEMPTS",
		"WAIT_IN_FLIGHT_SECONDS", "LOCAL_CACHE_SIZE", "LOCAL_CACHE_TTL_SECONDS",
		"NOTIFY_ALLOWED_HOSTS", "NOTIFY_SIGNING_SECRET", "KEY_FALLBACK", "KEY_JMESPATH", "PAYLOAD_JMESPATH", "IDEMPOTENCY_DISABLED", "IDEMGATE_ENV",
		"IDEMGATE_FAULT"}, envRetention)
)

func join(groups ...[]string) []string {
	var out []string
	for _, g := range groups {
		out = append(out, g...)
	}
	return out
}

func docOf(name string) string {
	for _, e := range envDocs {
		if e.name == name {
			return e.doc
		}
	}
	return ""
}

// exitCodes is the exit-code table of the binary's help.
const exitCodes = `exit codes:
  0  success
  1  task failed: the outcome is a failure (its errorType says why), or the operation failed
  2  bad usage: unknown command, bad flag or argument, unreadable event file, bad configuration
  3  not found: no record for the key (inspect, replay --key, forget)
  4  store unavailable: the durable store does not answer or is not migrated (run main migrate); nothing ran, retry later
`

// exitCodesShort ends a command's help, which stays one screen.
const exitCodesShort = "exit codes: 0 ok, 1 failed, 2 bad usage, 3 not found, 4 store unavailable (main -h says more)\n"

// usage writes the binary's help.
func usage(w io.Writer) {
	fmt.Fprint(w, `idemgate makes asynchronous tasks take effect at most once (Alibaba Cloud Function Compute 3.0).

usage:
  main                  inside FC (an FC_* runtime variable set): serve; elsewhere this text, exit 2
  main COMMAND [flags]  run a command; every command also takes --log-level LEVEL and -q
  main help [COMMAND]   this text, or a command's flags and environment (also main -h, main COMMAND -h)
  main help env         every environment variable the binary reads

commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %s\n        %s\n", strings.TrimSpace(c.name+" "+c.synopsis), c.summary)
	}
	fmt.Fprint(w, "\n"+exitCodes)
}

// envHelp writes `main help env`.
func envHelp(w io.Writer) {
	fmt.Fprint(w, "environment (a malformed value in any of them is a usage error, whatever the command):\n")
	for _, e := range envDocs {
		fmt.Fprintf(w, "  %-31s %s\n", e.name, e.doc)
	}
}

// help writes one command's synopsis, flags, the names of the variables it
// reads (main help env explains them) and the exit codes, in short.
func (c *command) help(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", strings.TrimSpace("main "+c.name+" "+c.synopsis), capitalize(c.summary))
	fmt.Fprint(w, "\nflags:\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	if len(c.env) > 0 {
		fmt.Fprint(w, "\nenvironment (main help env explains each):\n")
		line := " "
		for _, name := range c.env {
			if len(line)+1+len(name) > 110 {
				fmt.Fprintln(w, line)
				line = " "
			}
			line += " " + name
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprint(w, "\n"+exitCodesShort)
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}
