package deploy

import (
	"archive/zip"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestDeployFiles runs every consistency check on s.yaml and template.yml.
func TestDeployFiles(t *testing.T) {
	sDoc, rosDoc, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	m := newManifests(sDoc, rosDoc)
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(m); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestEnvironmentPlan logs which variables the deploy files set and which are
// left to the platform, the list the README/DEPLOY.md documents.
func TestEnvironmentPlan(t *testing.T) {
	sDoc, rosDoc, err := loadDocs()
	if err != nil {
		t.Fatal(err)
	}
	m := newManifests(sDoc, rosDoc)
	for _, name := range sortedKeys(m.s.env) {
		e := m.s.env[name]
		how := "default " + `"` + e.rendered + `"`
		if e.required {
			how = "required"
		}
		t.Logf("set      %-32s %s", name, how)
	}
	for _, name := range sortedKeys(notDeployed) {
		t.Logf("not set  %-32s %s", name, notDeployed[name])
	}
}

// TestCheckerCatchesDrift proves the checks are not vacuous: each drifted copy
// of the files must fail the named check.
func TestCheckerCatchesDrift(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(t *testing.T, s, ros *yaml.Node)
		fails  string
	}{
		{"variable missing from s.yaml", func(t *testing.T, s, _ *yaml.Node) {
			deleteKey(t, sProps(t, s), "environmentVariables", "MAX_ATTEMPTS")
		}, "environment covers config.Variables"},
		{"variable missing from template.yml", func(t *testing.T, _, ros *yaml.Node) {
			deleteKey(t, rosProps(t, ros, "Function"), "EnvironmentVariables", "LEASE_SECONDS")
		}, "environment covers config.Variables"},
		{"platform variable set by s.yaml", func(t *testing.T, s, _ *yaml.Node) {
			addKey(t, sProps(t, s), "FC_SERVER_PORT", "9000", "environmentVariables")
		}, "environment covers config.Variables"},
		{"variable the code does not read", func(t *testing.T, s, _ *yaml.Node) {
			addKey(t, sProps(t, s), "LLM_TIMEOUT", "${env('LLM_TIMEOUT', '60')}", "environmentVariables")
		}, "environment covers config.Variables"},
		{"secret with a default", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "${env('MYSQL_DSN', 'root@tcp(127.0.0.1:3306)/idemgate')}", "environmentVariables", "MYSQL_DSN")
		}, "secrets"},
		{"secret parameter echoed", func(t *testing.T, _, ros *yaml.Node) {
			deleteKey(t, get(ros, "Parameters"), "LlmApiKey", "NoEcho")
		}, "secrets"},
		{"state dir on the read-only code dir", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "${env('STATE_DIR', './.idemgate')}", "environmentVariables", "STATE_DIR")
		}, "deployed environment is a valid config"},
		{"wrong port", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "8080", "customRuntimeConfig", "port")
		}, "custom-runtime port"},
		{"wrong command", func(t *testing.T, _, ros *yaml.Node) {
			get(rosProps(t, ros, "Function"), "CustomRuntimeConfig", "Command").Content[0].Value = "/code/bootstrap"
		}, "runtime, handler and command"},
		{"timer trigger missing", func(t *testing.T, s, _ *yaml.Node) {
			removeItem(t, get(sProps(t, s), "triggers"), func(n *yaml.Node) bool { return scalar(get(n, "triggerType")) == "timer" })
		}, "timer trigger"},
		{"timer payload mistyped", func(t *testing.T, _, ros *yaml.Node) {
			setScalar(t, rosProps(t, ros, "SweepTrigger"), "sweeep", "TriggerConfig", "payload")
		}, "timer trigger"},
		{"eventbridge trigger missing", func(t *testing.T, _, ros *yaml.Node) {
			deleteKey(t, get(ros, "Resources"), "TasksTrigger")
		}, "eventbridge trigger"},
		{"filter on another event type", func(t *testing.T, s, _ *yaml.Node) {
			ts := get(sProps(t, s), "triggers")
			setScalar(t, ts.Content[0], `{"type":["idemgate:Task:Created"]}`, "triggerConfig", "eventRuleFilterPattern")
		}, "eventbridge trigger"},
		{"synchronous eventbridge invocation", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, get(sProps(t, s), "triggers").Content[0], "false", "triggerConfig", "asyncInvocationType")
		}, "eventbridge trigger"},
		{"too few FC retries", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "1", "asyncInvokeConfig", "maxAsyncRetryAttempts")
		}, "async retries cover MAX_ATTEMPTS"},
		{"no dead-letter queue", func(t *testing.T, _, ros *yaml.Node) {
			deleteKey(t, rosProps(t, ros, "AsyncInvokeConfig"), "DestinationConfig")
		}, "async retries cover MAX_ATTEMPTS"},
		{"timeout shorter than the model call", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "60", "timeout")
		}, "timeout covers the model call"},
		{"model timeout raised past the function timeout", func(t *testing.T, _, ros *yaml.Node) {
			setScalar(t, get(ros, "Parameters"), "100", "LlmTimeoutSeconds", "Default")
		}, "timeout covers the model call"},
		{"memory differs between the files", func(t *testing.T, _, ros *yaml.Node) {
			setScalar(t, rosProps(t, ros, "Function"), "1024", "MemorySize")
		}, "s.yaml and template.yml agree"},
		{"concurrency from an env var (renders as a string)", func(t *testing.T, s, _ *yaml.Node) {
			setScalar(t, sProps(t, s), "${env('CONCURRENCY', 10)}", "instanceConcurrency")
		}, "files parse"},
		{"misspelt property", func(t *testing.T, s, _ *yaml.Node) {
			renameKey(t, sProps(t, s), "memorySize", "memroySize")
		}, "known properties"},
		{"no preStop hook", func(t *testing.T, s, _ *yaml.Node) {
			deleteKey(t, sProps(t, s), "instanceLifecycleConfig", "preStop")
		}, "lifecycle hooks reach the binary"},
		{"initializer timeout differs between the files", func(t *testing.T, _, ros *yaml.Node) {
			setScalar(t, rosProps(t, ros, "Function"), "30", "InstanceLifecycleConfig", "Initializer", "Timeout")
		}, "s.yaml and template.yml agree"},
		{"no VPC", func(t *testing.T, s, _ *yaml.Node) {
			deleteKey(t, sProps(t, s), "vpcConfig")
		}, "network, logs and role"},
		{"bucket-wide OSS grant", func(t *testing.T, _, ros *yaml.Node) {
			ossStatement(t, ros, func(st *yaml.Node) {
				get(st, "Resource").Content[0] = &yaml.Node{Kind: yaml.ScalarNode, Value: "acs:oss:*:*:*"}
			})
		}, "role is least privilege"},
		{"delete permission", func(t *testing.T, _, ros *yaml.Node) {
			ossStatement(t, ros, func(st *yaml.Node) {
				a := get(st, "Action")
				a.Content = append(a.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "oss:DeleteObject"})
			})
		}, "role is least privilege"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, ros, err := loadDocs() // a fresh copy per case
			if err != nil {
				t.Fatal(err)
			}
			c.mutate(t, s, ros)
			failed := runChecks(newManifests(s, ros))
			if failed[c.fails] == nil {
				t.Fatalf("check %q passed on the drifted copy; failures: %v", c.fails, failed)
			}
			t.Logf("%s: %v", c.fails, failed[c.fails])
		})
	}
}

// TestROSIntrinsics: template.yml may use the short forms (!Ref, !Sub, !If,
// !Equals) as well as Fn::…; both render the same through the yaml.Node reader.
func TestROSIntrinsics(t *testing.T) {
	const src = `
Parameters:
  Bucket: {Type: String, Default: results}
  Secret: {Type: String, NoEcho: true}
  Endpoint: {Type: String, Default: ''}
Conditions:
  NoEndpoint: !Equals [!Ref Endpoint, '']
  LongForm:
    Fn::Not:
      - Fn::Equals:
          - Ref: Endpoint
          - ''

Values:
  ref: !Ref Bucket
  sub: !Sub 'acs:oss:*:${ALIYUN::AccountId}:${Bucket}/tasks/*'
  subList: !Sub ['${Bucket}-x', {}]
  if: !If [NoEndpoint, !Sub 'https://oss-${ALIYUN::Region}-internal.aliyuncs.com', !Ref Endpoint]
  ifLong:
    Fn::If: [LongForm, a, b]
  secret: !Ref Secret
  plain: text
`
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	r := rosRenderer{params: get(&doc, "Parameters"), conditions: get(&doc, "Conditions")}
	for key, want := range map[string]struct {
		value    string
		required bool
	}{
		"ref":     {"results", false},
		"sub":     {"acs:oss:*:1234567890123456:results/tasks/*", false},
		"subList": {"results-x", false},
		"if":      {"https://oss-cn-hangzhou-internal.aliyuncs.com", false},
		"ifLong":  {"b", false},
		"secret":  {"<Secret>", true},
		"plain":   {"text", false},
	} {
		got, required, err := r.render(get(&doc, "Values", key))
		if err != nil || got != want.value || required != want.required {
			t.Errorf("%s: got %q required=%v err=%v, want %q required=%v", key, got, required, err, want.value, want.required)
		}
	}
}

// TestBuildScript builds the deploy zip into a temporary directory and checks
// that FC can run it: main at the root, mode 0755, a static linux/amd64 ELF
// built with CGO off and -trimpath.
func TestBuildScript(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the whole binary")
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash is required (CI=true) but not found")
		}
		t.Skip("no bash (set CI=true to make this a failure)")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bash, filepath.Join(repoRoot, "scripts", "build.sh"))
	cmd.Env = append(os.Environ(), "OUT_DIR="+out, "GOOS=darwin", "CGO_ENABLED=1") // the script must override these
	log, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/build.sh: %v\n%s", err, log)
	}
	if !strings.Contains(string(log), "bytes") {
		t.Errorf("build.sh does not print the sizes:\n%s", log)
	}

	z, err := zip.OpenReader(filepath.Join(out, "dist", "function.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	if len(z.File) != 1 || z.File[0].Name != "main" {
		var names []string
		for _, f := range z.File {
			names = append(names, f.Name)
		}
		t.Fatalf("zip holds %v, want exactly [main]", names)
	}
	entry := z.File[0]
	if mode := entry.Mode(); !mode.IsRegular() || mode.Perm() != 0o755 {
		t.Errorf("main has mode %v in the zip, want -rwxr-xr-x", mode)
	}
	rc, err := entry.Open()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	target, err := os.ReadFile(filepath.Join(out, "target", "main"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bin, target) {
		t.Error("the zip's main differs from target/main (what s deploy uploads)")
	}
	if st, err := os.Stat(filepath.Join(out, "target", "main")); err == nil && st.Mode().Perm()&0o111 == 0 {
		t.Errorf("target/main is not executable: %v", st.Mode())
	}

	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("main is not an ELF file: %v", err)
	}
	if f.Class != elf.ELFCLASS64 || f.Machine != elf.EM_X86_64 || f.Type != elf.ET_EXEC {
		t.Errorf("ELF %v %v %v, want a 64-bit x86-64 executable", f.Class, f.Machine, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("main asks for a dynamic loader: it must be static (CGO_ENABLED=0)")
		}
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("no Go build info in main: %v", err)
	}
	want := map[string]string{"GOOS": "linux", "GOARCH": "amd64", "CGO_ENABLED": "0", "-trimpath": "true"}
	for _, s := range info.Settings {
		if w, ok := want[s.Key]; ok {
			if s.Value != w {
				t.Errorf("built with %s=%s, want %s", s.Key, s.Value, w)
			}
			delete(want, s.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("build settings missing from main: %v", want)
	}
	// -trimpath keeps -ldflags out of the build info: look at the sections instead.
	for _, name := range []string{".symtab", ".debug_info", ".zdebug_info"} {
		if f.Section(name) != nil {
			t.Errorf("main has %s: build with -ldflags='-s -w'", name)
		}
	}
}

// ---- mutation helpers (t.Fatal when the path is missing, so a case can never be a no-op)

func sProps(t *testing.T, doc *yaml.Node) *yaml.Node {
	t.Helper()
	res := get(doc, "resources")
	for _, name := range keys(res) {
		if scalar(get(res, name, "component")) == "fc3" {
			return get(res, name, "props")
		}
	}
	t.Fatal("s.yaml: no fc3 resource")
	return nil
}

func rosProps(t *testing.T, doc *yaml.Node, resource string) *yaml.Node {
	t.Helper()
	p := get(doc, "Resources", resource, "Properties")
	if p == nil {
		t.Fatalf("template.yml: no resource %s", resource)
	}
	return p
}

// mapping returns the mapping at path under n, or fails the test.
func mapping(t *testing.T, n *yaml.Node, path ...string) *yaml.Node {
	t.Helper()
	m := get(n, path...)
	if m == nil || m.Kind != yaml.MappingNode {
		t.Fatalf("no mapping at %v", path)
	}
	return m
}

func keyIndex(t *testing.T, m *yaml.Node, key string) int {
	t.Helper()
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	t.Fatalf("no key %q", key)
	return -1
}

// setScalar sets the scalar at path (last element the key) and lets YAML re-type it.
func setScalar(t *testing.T, n *yaml.Node, value string, path ...string) {
	t.Helper()
	m := mapping(t, n, path[:len(path)-1]...)
	v := m.Content[keyIndex(t, m, path[len(path)-1])+1]
	var fresh yaml.Node
	if err := yaml.Unmarshal([]byte(value), &fresh); err != nil || deref(&fresh).Kind != yaml.ScalarNode {
		*v = yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value}
		return
	}
	*v = *deref(&fresh)
}

func deleteKey(t *testing.T, n *yaml.Node, path ...string) {
	t.Helper()
	m := mapping(t, n, path[:len(path)-1]...)
	i := keyIndex(t, m, path[len(path)-1])
	m.Content = slices.Delete(m.Content, i, i+2)
}

func addKey(t *testing.T, n *yaml.Node, key, value string, path ...string) {
	t.Helper()
	m := mapping(t, n, path...)
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key},
		&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: value})
}

func renameKey(t *testing.T, n *yaml.Node, from, to string) {
	t.Helper()
	m := mapping(t, n)
	m.Content[keyIndex(t, m, from)].Value = to
}

func removeItem(t *testing.T, seq *yaml.Node, match func(*yaml.Node) bool) {
	t.Helper()
	if seq == nil || seq.Kind != yaml.SequenceNode {
		t.Fatal("not a sequence")
	}
	i := slices.IndexFunc(seq.Content, match)
	if i < 0 {
		t.Fatal("no matching item")
	}
	seq.Content = slices.Delete(seq.Content, i, i+1)
}

// ossStatement edits the role policy statement that grants OSS actions.
func ossStatement(t *testing.T, ros *yaml.Node, edit func(st *yaml.Node)) {
	t.Helper()
	for _, name := range keys(get(ros, "Resources")) {
		if scalar(get(ros, "Resources", name, "Type")) != "ALIYUN::RAM::Role" {
			continue
		}
		for _, pol := range nodeList(get(ros, "Resources", name, "Properties", "Policies")) {
			for _, st := range nodeList(get(pol, "PolicyDocument", "Statement")) {
				if slices.ContainsFunc(nodeList(get(st, "Action")), func(a *yaml.Node) bool { return strings.HasPrefix(a.Value, "oss:") }) {
					edit(st)
					return
				}
			}
		}
	}
	t.Fatal("template.yml: no OSS statement in the role policy")
}
