// Package docs_test makes README.md and docs/*.md executable: a doc line the
// code contradicts fails `go test ./...` (and so .ci/run).
//
// # The marker
//
// A fenced `sh` (or `bash`) block runs when an HTML comment that starts with
// "<!-- test" comes right before it (blank lines between are allowed). The
// comment may be one line, `<!-- test -->`, or several, one directive a line:
//
//		<!-- test
//		expect: "decision": "FIRST"
//		expect: REPEAT_DONE
//		exit: 0
//		needs: mysql
//		-->
//		```sh
//		go run . invoke --event testdata/events/eventbridge-single.json
//		go run . invoke --event testdata/events/eventbridge-single.json
//		```
//
//	  - expect: a fragment that must appear in the block's output (stdout and
//	    stderr together); several must appear in the order given.
//	  - exit: the block's exit status (default 0). The block runs under
//	    `bash -euo pipefail`, so the first failing command ends it.
//	  - needs: mysql gives the block MYSQL_DSN, a fresh database on the test
//	    server (internal/dev/testenv, dropped after the test).
//	  - needs: model-key gives the block the shell of someone with a billed
//	    model configured (DASHSCOPE_API_KEY, LLM_API_KEY, LLM_MODEL=qwen-plus)
//	    whose LLM_BASE_URL is a loopback tripwire: a request there fails the
//	    test. A block that says it is offline proves it under that shell.
//	  - needs: npm runs the block with npm offline (npm_config_offline=true):
//	    the packages its npx commands name come from npm's cache, which
//	    .ci/run fills (tests send nothing past loopback). Without npx, or with
//	    the packages not cached, the block is skipped, or fails under CI=true.
//
// How it runs: from the repository root, with the function built once;
// `go run .`, `./target/main` and `main` all run that binary. Every variable
// the function reads is cleared, except STATE_DIR, a fresh directory per page,
// so the blocks of one page share the embedded store, in page order, and never
// touch ./.idemgate. Blocks without a marker are never run (they show cloud
// commands, placeholders, or long runs).
//
// TestDocsLinks checks every relative link and image of the same pages: the
// file must exist, and a #anchor must name a heading (GitHub's slugs) or an
// <a id> of the target page.
package docs_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// pages are the documents held to the code: the README and docs/*.md.
func pages(t *testing.T) (root string, files []string) {
	t.Helper()
	root, err := proc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err = filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return root, append([]string{filepath.Join(root, "README.md")}, files...)
}

// block is one runnable command block of a page.
type block struct {
	line    int // of the opening fence, 1-based
	script  string
	expects []string
	exit    int
	needs   map[string]bool
}

// fence matches an opening or closing code fence, indented or not.
var fence = regexp.MustCompile("^(\\s*)(```+|~~~+)\\s*([A-Za-z0-9_-]*)")

// parseBlocks finds the marked blocks of a page.
func parseBlocks(text string) ([]block, error) {
	lines := strings.Split(text, "\n")
	var out []block
	var pending *block
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		trim := strings.TrimSpace(l)
		switch {
		case strings.HasPrefix(trim, "<!-- test"):
			b, end, err := parseMarker(lines, i)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			pending, i = &b, end
		case fence.MatchString(l):
			m := fence.FindStringSubmatch(l)
			end := closingFence(lines, i, m[2])
			if pending != nil {
				if m[3] != "sh" && m[3] != "bash" {
					return nil, fmt.Errorf("line %d: a test marker precedes a %q block, not sh", i+1, m[3])
				}
				pending.line = i + 1
				pending.script = dedent(lines[i+1:end], m[1])
				out = append(out, *pending)
				pending = nil
			}
			i = end
		case trim == "":
		default:
			if pending != nil {
				return nil, fmt.Errorf("line %d: a test marker is not followed by a code block", i+1)
			}
		}
	}
	if pending != nil {
		return nil, fmt.Errorf("a test marker at the end of the page precedes no block")
	}
	return out, nil
}

// parseMarker reads the comment that starts at lines[i]; end is its last line.
func parseMarker(lines []string, i int) (b block, end int, err error) {
	b.needs = map[string]bool{}
	body := strings.TrimPrefix(strings.TrimSpace(lines[i]), "<!-- test")
	for end = i; ; end++ {
		if end > i {
			body = strings.TrimSpace(lines[end])
		}
		done := strings.HasSuffix(body, "-->")
		body = strings.TrimSpace(strings.TrimSuffix(body, "-->"))
		if body != "" {
			if err := b.directive(body); err != nil {
				return b, end, err
			}
		}
		if done {
			return b, end, nil
		}
		if end+1 >= len(lines) {
			return b, end, fmt.Errorf("unterminated test marker")
		}
	}
}

func (b *block) directive(d string) error {
	name, val, ok := strings.Cut(d, ":")
	val = strings.TrimSpace(val)
	switch name = strings.TrimSpace(name); {
	case !ok:
		return fmt.Errorf("test marker: %q is not NAME: VALUE", d)
	case name == "expect":
		b.expects = append(b.expects, val)
	case name == "exit":
		n, err := strconv.Atoi(val)
		if err != nil {
			return fmt.Errorf("test marker: exit %q", val)
		}
		b.exit = n
	case name == "needs":
		for _, s := range strings.FieldsFunc(val, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
			if s != "mysql" && s != "model-key" && s != "npm" {
				return fmt.Errorf("test marker: needs %q (mysql, model-key or npm)", s)
			}
			b.needs[s] = true
		}
	default:
		return fmt.Errorf("test marker: unknown directive %q", name)
	}
	return nil
}

func closingFence(lines []string, i int, mark string) int {
	for j := i + 1; j < len(lines); j++ {
		if strings.HasPrefix(strings.TrimSpace(lines[j]), mark) {
			return j
		}
	}
	return len(lines)
}

func dedent(lines []string, indent string) string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimPrefix(l, indent)
	}
	return strings.Join(out, "\n") + "\n"
}

// binaryNames are how the pages call the function; each becomes `main`,
// the binary the test built, first on PATH.
var binaryNames = regexp.MustCompile(`(^|[\s;&|(])(go run \.|\./target/main)(\s)`)

// configVar reports whether an environment variable configures the function
// (cleared for the blocks, as internal/cli's tests do).
func configVar(name string) bool {
	for _, p := range []string{"MYSQL_", "REDIS_", "OSS_", "LLM_", "DASHSCOPE_", "ALIBABA_CLOUD_", "NOTIFY_", "FC_",
		"KEY_", "IDEMPOTENCY_"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	switch name {
	case "STATE_DIR", "DEDUP_TTL_SECONDS", "LEASE_SECONDS", "MAX_ATTEMPTS", "RETENTION_DAYS", "STATS_RETENTION_DAYS",
		"IDEMGATE_ENV", "IDEMGATE_FAULT":
		return true
	}
	return false
}

func TestDocsCommands(t *testing.T) {
	root, files := pages(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := t.TempDir()
	if _, err := proc.Build(ctx, bin, false); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := parseBlocks(string(text))
		rel, _ := filepath.Rel(root, f)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		state := t.TempDir() // one embedded store per page, shared by its blocks in order
		for _, b := range blocks {
			ran++
			t.Run(fmt.Sprintf("%s:%d", rel, b.line), func(t *testing.T) {
				runBlock(ctx, t, root, bin, state, b)
			})
		}
	}
	if ran == 0 {
		t.Fatal("no page has a runnable block: the marker is not found")
	}
}

// modelTripwire is the environment of needs: model-key: a key and a real
// model, the endpoint a loopback server that fails the test when called.
func modelTripwire(t *testing.T) []string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the block called the model: %s %s (it must stay offline with a key in the environment)", r.Method, r.URL.Path)
		http.Error(w, "tripwire", http.StatusServiceUnavailable)
	}))
	t.Cleanup(srv.Close)
	return []string{"DASHSCOPE_API_KEY=sk-docs-tripwire", "LLM_API_KEY=sk-docs-tripwire", "LLM_MODEL=qwen-plus",
		"LLM_BASE_URL=" + srv.URL + "/v1"}
}

func runBlock(ctx context.Context, t *testing.T, root, bin, state string, b block) {
	env := []string{"STATE_DIR=" + state, "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); !configVar(name) && name != "PATH" {
			env = append(env, kv)
		}
	}
	if b.needs["mysql"] {
		env = append(env, "MYSQL_DSN="+testenv.FreshMySQLDSN(t))
	}
	if b.needs["model-key"] {
		env = append(env, modelTripwire(t)...)
	}
	if b.needs["npm"] {
		if _, err := exec.LookPath("npx"); err != nil {
			npmUnavailable(t, err.Error())
		}
		env = append(env, "npm_config_offline=true", "npm_config_update_notifier=false", "npm_config_fund=false")
	}
	script := binaryNames.ReplaceAllString(b.script, "${1}main${3}")
	bctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(bctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir, cmd.Env = root, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != b.exit && b.needs["npm"] && strings.Contains(out.String(), "ENOTCACHED") {
		npmUnavailable(t, "a package the block names is not in npm's cache:\n"+out.String())
	}
	if code != b.exit {
		t.Fatalf("exit %d, the page says %d; the block:\n%s\noutput:\n%s", code, b.exit, b.script, out.String())
	}
	rest := out.String()
	for _, want := range b.expects {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("the output lacks %q (or has it before the previous fragment); the block:\n%s\noutput:\n%s",
				want, b.script, out.String())
		}
		rest = rest[i+len(want):]
	}
}

// npmUnavailable skips a block that needs npm, or fails it where the tools
// are required (CI=true: .ci/run installs them).
func npmUnavailable(t *testing.T, why string) {
	t.Helper()
	if testenv.Required() {
		t.Fatalf("the block needs npx and its packages in npm's cache (.ci/run puts them there): %s", why)
	}
	t.Skipf("npx or its packages unavailable offline (set CI=true to make this a failure; .ci/run caches them): %s", why)
}
