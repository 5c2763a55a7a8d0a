package deploy

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// localProps are the fc3 properties `s local invoke` reads (fc3 component,
// src/subCommands/local/impl/baseLocal.ts).
type localProps struct {
	Region              string `yaml:"region"`
	FunctionName        string `yaml:"functionName"`
	Runtime             string `yaml:"runtime"`
	Handler             string `yaml:"handler"`
	Code                string `yaml:"code"`
	MemorySize          int    `yaml:"memorySize"`
	Timeout             int    `yaml:"timeout"`
	CustomRuntimeConfig struct {
		Command []string `yaml:"command"`
		Args    []string `yaml:"args"`
		Port    int      `yaml:"port"`
	} `yaml:"customRuntimeConfig"`
	InstanceLifecycleConfig struct {
		Initializer struct {
			Handler string `yaml:"handler"`
			Timeout int    `yaml:"timeout"`
		} `yaml:"initializer"`
	} `yaml:"instanceLifecycleConfig"`
	EnvironmentVariables yaml.Node `yaml:"environmentVariables"` // a Node: the file's order, like the CLI's
}

// TestLocalInvoke does what `s local invoke -t s.local.yaml -f
// testdata/events/eventbridge-single.json` does for the custom.debian10
// runtime, without Docker: the fc3 component mounts the code directory at
// /code, starts customRuntimeConfig.command with its own FC_* variables and
// the function's environmentVariables, and sends the event with the
// platform's headers (invoke/customLocalInvoke.ts, invoke/baseLocalInvoke.ts).
// Each `s local invoke` is a new container on the same code directory, so
// the duplicate runs in a second process: it must find the first one's
// record under STATE_DIR and answer REPEAT_DONE with the same result.
func TestLocalInvoke(t *testing.T) {
	out, _ := buildArtefact(t)
	p := readLocalProps(t)
	code := unzipCode(t, filepath.Join(out, "dist", "function.zip"))
	event, err := os.ReadFile(filepath.Join(repoRoot, sampleTaskEvent))
	if err != nil {
		t.Fatal(err)
	}
	var compact bytes.Buffer // the CLI sends JSON.stringify(JSON.parse(file))
	if err := json.Compact(&compact, event); err != nil {
		t.Fatal(err)
	}
	port := hostPort(t, p.CustomRuntimeConfig.Port)
	t.Logf("code directory %s (/code), port %d (configured %d)", code, port, p.CustomRuntimeConfig.Port)

	first := runContainer(t, p, code, port, compact.Bytes())
	second := runContainer(t, p, code, port, compact.Bytes())
	for i, inv := range []invocation{first, second} {
		t.Logf("--- s local invoke #%d (request %s): HTTP %d\n%s%s", i+1, inv.requestID, inv.status,
			atCode(inv.log, code), atCode(string(inv.body), code))
	}
	a, b := first.outcome(t), second.outcome(t)
	if a.Status != "SUCCEEDED" || a.Decision != "FIRST" || a.Duplicate {
		t.Errorf("first invoke: %+v, want SUCCEEDED, FIRST, not a duplicate", a)
	}
	if b.Status != "SUCCEEDED" || b.Decision != "REPEAT_DONE" || !b.Duplicate {
		t.Errorf("second invoke: %+v, want SUCCEEDED, REPEAT_DONE, a duplicate", b)
	}
	if a.ResultRef == "" || b.ResultRef != a.ResultRef || b.Key != a.Key {
		t.Errorf("result_ref %q then %q, key %q then %q: want the same", a.ResultRef, b.ResultRef, a.Key, b.Key)
	}
	// The result is a local object under STATE_DIR, inside the mounted code directory.
	want := "file://" + filepath.ToSlash(filepath.Join(code, strings.TrimPrefix(LocalStateDir, "/code/"))) + "/"
	if !strings.HasPrefix(a.ResultRef, want) {
		t.Errorf("result_ref %q is not under %s", a.ResultRef, want)
	} else if _, err := os.Stat(strings.TrimPrefix(a.ResultRef, "file://")); err != nil {
		t.Errorf("the result object: %v", err)
	}
	checkDocsSample(t, first, second)
}

// checkDocsSample: the sample output of docs/deploy.md §10 is what the
// function prints now — the same lines in the same order, each with the
// same keys (times, ids and paths differ from run to run).
func checkDocsSample(t *testing.T, invs ...invocation) {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sec, _ := strings.Cut(string(doc), "\n## 10. ")
	var samples []string // the blocks fenced without a language: the output samples
	var cur []string
	open, plain := false, false
	for _, l := range strings.Split(sec, "\n") {
		switch {
		case !open && strings.HasPrefix(l, "```"):
			open, plain, cur = true, l == "```", nil
		case open && l == "```":
			if open = false; plain {
				samples = append(samples, strings.Join(cur, "\n"))
			}
		case open:
			cur = append(cur, l)
		}
	}
	if len(samples) < len(invs) {
		t.Fatalf("docs/deploy.md §10 has %d output samples, want %d", len(samples), len(invs))
	}
	for i, inv := range invs {
		if want, got := lineShapes(samples[i]), lineShapes(inv.log+"\n"+string(inv.body)); !slices.Equal(want, got) {
			t.Errorf("docs/deploy.md §10's sample %d is not what the function prints now; paste the lines `go test -v "+
				"-run TestLocalInvoke ./deploy/` logs. Shapes now:\n%s\nin the page:\n%s", i+1,
				strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// lineShapes is each JSON line's message (without its request id) and keys.
func lineShapes(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(strings.TrimSpace(l)), &m) != nil {
			continue
		}
		msg, _ := m["msg"].(string)
		msg, _, _ = strings.Cut(msg, " RequestId:")
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		out = append(out, msg+" "+strings.Join(keys, ","))
	}
	return out
}

type outcome struct {
	Key       string `json:"idempotency_key"`
	Status    string `json:"status"`
	Duplicate bool   `json:"duplicate"`
	Decision  string `json:"decision"`
	ResultRef string `json:"result_ref"`
}

type invocation struct {
	requestID string
	status    int
	body      []byte
	log       string
}

func (inv invocation) outcome(t *testing.T) outcome {
	t.Helper()
	var o outcome
	if inv.status != http.StatusOK {
		t.Fatalf("HTTP %d: %s\nfunction log:\n%s", inv.status, inv.body, inv.log)
	}
	if err := json.Unmarshal(inv.body, &o); err != nil {
		t.Fatalf("answer %q: %v", inv.body, err)
	}
	return o
}

// readLocalProps reads the fc3 resource of the committed s.local.yaml.
func readLocalProps(t *testing.T) localProps {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "s.local.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("${")) {
		t.Fatal("s.local.yaml has ${…} expressions: a local run must need no exports")
	}
	var doc struct {
		Resources map[string]struct {
			Component string     `yaml:"component"`
			Props     localProps `yaml:"props"`
		} `yaml:"resources"`
	}
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	res, ok := doc.Resources[resourceName]
	if !ok || res.Component != "fc3" {
		t.Fatalf("s.local.yaml: no fc3 resource %q", resourceName)
	}
	if res.Props.Runtime != "custom.debian10" || len(res.Props.CustomRuntimeConfig.Command) == 0 {
		t.Fatalf("s.local.yaml: runtime %q, command %q: this test emulates custom.debian10", res.Props.Runtime, res.Props.CustomRuntimeConfig.Command)
	}
	return res.Props
}

// unzipCode unpacks the deploy zip into a fresh code directory, keeping the
// file modes (main must stay executable).
func unzipCode(t *testing.T, zipPath string) string {
	t.Helper()
	z, err := zip.OpenReader(zipPath)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	dir := t.TempDir()
	for _, f := range z.File {
		if !filepath.IsLocal(f.Name) {
			t.Fatalf("zip entry %q escapes the code directory", f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, f.Name), data, f.Mode().Perm())
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// hostPort is the port the function listens on: the configured one, or
// the next free one as the CLI's portfinder picks for the container's
// published port (the function itself cannot move, there being no
// container here).
func hostPort(t *testing.T, from int) int {
	t.Helper()
	for p := from; p < from+200; p++ {
		ln, err := net.Listen("tcp", ":"+strconv.Itoa(p)) // where the server binds
		if err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatalf("no free port from %d", from)
	return 0
}

// containerEnv is the environment of the function in `s local invoke`: the
// component's FC_* variables and the access's credentials, then the
// function's environmentVariables, then the custom runtime's own; a later
// name wins, as with docker -e.
func containerEnv(p localProps, port int) []string {
	a := LocalAccess
	env := []string{"FC_RUNTIME=" + p.Runtime, "FC_TIMEOUT=" + strconv.Itoa(p.Timeout), "FC_FUNC_CODE_PATH=/code/",
		"ALIBABA_CLOUD_ACCESS_KEY_ID=" + a.AccessKeyID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET=" + a.AccessKeySecret,
		"ALIBABA_CLOUD_SECURITY_TOKEN=", "FC_ACCOUNT_ID=" + a.AccountID, "FC_FUNCTION_HANDLER=" + p.Handler,
		"FC_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(p.MemorySize), "FC_FUNCTION_NAME=" + p.FunctionName,
		"FC_REGION=" + p.Region, "FC_CUSTOM_LISTEN_PORT=" + strconv.Itoa(port), "FC_INSTANCE_ID=" + uuid()}
	if init := p.InstanceLifecycleConfig.Initializer; init.Handler != "" {
		env = append(env, "FC_INITIALIZER_HANDLER="+init.Handler, "FC_INITIALIZATION_TIMEOUT="+strconv.Itoa(init.Timeout))
	}
	vars := p.EnvironmentVariables.Content
	for i := 0; i+1 < len(vars); i += 2 {
		env = append(env, vars[i].Value+"="+vars[i+1].Value)
	}
	agent := strings.Join(append(p.CustomRuntimeConfig.Command, p.CustomRuntimeConfig.Args...), " ")
	return append(env, "AGENT_SCRIPT="+agent, "FC_SERVER_PORT="+strconv.Itoa(port))
}

// runContainer is one `s local invoke`: start the command on the code
// directory, POST /initialize (the initializer is configured) and the event
// to /invoke, then kill it as `docker kill` does.
func runContainer(t *testing.T, p localProps, code string, port int, event []byte) invocation {
	t.Helper()
	// The code directory is mounted at /code and outlives the container; /tmp
	// is the container's own, new each time.
	tmp := t.TempDir()
	env := containerEnv(p, port)
	for i, kv := range env {
		name, v, _ := strings.Cut(kv, "=")
		if m := atHost(v, "/code", code); m != v {
			env[i] = name + "=" + m
		} else {
			env[i] = name + "=" + atHost(v, "/tmp", tmp)
		}
	}
	env = append(env, "TMPDIR="+tmp)
	argv := p.CustomRuntimeConfig.Command
	cmd := exec.Command(atHost(argv[0], "/code", code), append(argv[1:], p.CustomRuntimeConfig.Args...)...)
	cmd.Env, cmd.Dir = env, code
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() string {
		cmd.Process.Kill()
		<-exited
		return log.String()
	}
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	if err := waitListening(port, 60*time.Second, exited); err != nil {
		t.Fatalf("%v\nfunction log:\n%s", err, stop())
	}
	inv := invocation{requestID: uuid()}
	if status, body, err := post(base+"/initialize", http.Header{"x-fc-request-id": {"init-" + inv.requestID}}, nil, 30*time.Second); err != nil || status != http.StatusOK {
		log := stop()
		t.Fatalf("POST /initialize: %d %s %v\nfunction log:\n%s", status, body, err, log)
	}
	var err error
	inv.status, inv.body, err = post(base+"/invoke", invokeHeaders(p, inv.requestID), event, time.Duration(p.Timeout+3)*time.Second)
	inv.log = stop()
	if err != nil {
		t.Fatalf("POST /invoke: %v\nfunction log:\n%s", err, inv.log)
	}
	return inv
}

// invokeHeaders are the headers the component sends with an invocation.
func invokeHeaders(p localProps, requestID string) http.Header {
	a := LocalAccess
	h := http.Header{}
	for k, v := range map[string]string{
		"Content-Type": "application/octet-stream", "x-fc-request-id": requestID, "x-fc-function-name": p.FunctionName,
		"x-fc-function-memory": strconv.Itoa(p.MemorySize), "x-fc-function-timeout": strconv.Itoa(p.Timeout),
		"x-fc-function-handler": p.Handler, "x-fc-region": p.Region, "x-fc-account-id": a.AccountID,
		"x-fc-access-key-id": a.AccessKeyID, "x-fc-access-key-secret": a.AccessKeySecret, "x-fc-security-token": "",
		"x-fc-initialization-timeout": strconv.Itoa(p.InstanceLifecycleConfig.Initializer.Timeout),
		"x-fc-function-initializer":   p.InstanceLifecycleConfig.Initializer.Handler,
		"X-Fc-Log-Type":               "Tail", "X-Fc-Event-Type": "Default", "X-Fc-HTTP-Path": "/",
	} {
		h.Set(k, v)
	}
	return h
}

func post(url string, h http.Header, body []byte, timeout time.Duration) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// waitListening polls the port until the function accepts connections, it
// exits, or the time is up.
func waitListening(port int, limit time.Duration, exited <-chan error) error {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("the function exited before listening: %v", err)
		default:
		}
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("the function did not listen on %d within %v", port, limit)
}

// atHost maps a path under the container's dir onto the host's.
func atHost(v, dir, host string) string {
	if v == dir || strings.HasPrefix(v, dir+"/") {
		return host + strings.TrimPrefix(v, dir)
	}
	return v
}

// atCode maps the code directory back to /code, for the transcript.
func atCode(s, code string) string { return strings.ReplaceAll(s, code, "/code") }

func uuid() string {
	b := make([]byte, 16)
	rand.Read(b)
	b[6], b[8] = b[6]&0x0f|0x40, b[8]&0x3f|0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
