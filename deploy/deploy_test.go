package deploy

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFilesAreCurrent: the committed deploy files are exactly what
// the description generates.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	files, err := Files()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		committed, err := os.ReadFile(filepath.Join(repoRoot, f.Name))
		if err != nil {
			t.Errorf("%v: run `go generate ./deploy/` and commit the result", err)
			continue
		}
		if !bytes.Equal(committed, f.Data) {
			line, want, got := firstDifference(f.Data, committed)
			t.Errorf("%s is not what deploy/spec.go generates; first difference at line %d:\n  committed: %q\n  generated: %q\n"+
				"Edit deploy/spec.go (never the file itself), run `go generate ./deploy/` and commit the result.",
				f.Name, line, got, want)
		}
	}
}

func firstDifference(want, got []byte) (line int, w, g string) {
	wl, gl := strings.Split(string(want), "\n"), strings.Split(string(got), "\n")
	for i := 0; i < max(len(wl), len(gl)); i++ {
		w, g = "", ""
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			return i + 1, w, g
		}
	}
	return 0, "", ""
}

// TestDescription runs every check on the description.
func TestDescription(t *testing.T) {
	cloud, local := Idemgate(), Local()
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(cloud, local); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestChecksCatchMutations proves the checks are not vacuous: each changed
// description must fail the named check.
func TestChecksCatchMutations(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(cloud, local *Stack)
		fails  string
	}{
		{"variable missing", func(c, _ *Stack) { c.Function.Env = dropEnv(c.Function.Env, "MAX_ATTEMPTS") },
			"environment covers config.Variables"},
		{"platform variable set", func(c, _ *Stack) {
			c.Function.Env = append(c.Function.Env, EnvVar{"FC_SERVER_PORT", Lit("9000")})
		}, "environment covers config.Variables"},
		{"variable the code does not read", func(_, l *Stack) {
			l.Function.Env = append(l.Function.Env, EnvVar{"LLM_TIMEOUT", Lit("60")})
		}, "environment covers config.Variables"},
		{"export named unlike the variable", func(c, _ *Stack) { envValue(*c, "LEASE_SECONDS").(*Input).Env = "LEASE" },
			"environment covers config.Variables"},
		{"secret with a default", func(c, _ *Stack) { envValue(*c, "MYSQL_DSN").(*Input).Default = Lit("root@/x") },
			"secrets come from inputs"},
		{"secret echoed by ROS", func(c, _ *Stack) { envValue(*c, "LLM_API_KEY").(*Input).Secret = false },
			"secrets come from inputs"},
		{"state dir on the read-only code dir", func(c, _ *Stack) {
			envValue(*c, "STATE_DIR").(*Input).Default = Lit("./.idemgate")
		}, "deployed environment is a valid config"},
		{"local run needs MySQL", func(_, l *Stack) {
			l.Function.Env = append(l.Function.Env, EnvVar{"MYSQL_DSN", Lit("root@tcp(127.0.0.1:3306)/x")})
		}, "local environment needs Docker alone"},
		{"local state lost with the container", func(_, l *Stack) { l.Function.Env[1].Value = Lit("/tmp/idemgate") },
			"local environment needs Docker alone"},
		{"wrong port", func(c, _ *Stack) { c.Function.Port = 8080 }, "custom-runtime port and command"},
		{"wrong command", func(_, l *Stack) { l.Function.Command = []string{"/code/bootstrap"} },
			"custom-runtime port and command"},
		{"filter on another event type", func(c, _ *Stack) {
			c.Function.Triggers[0].EventBridge.EventTypes = []string{"idemgate:Task:Created"}
		}, "eventbridge trigger"},
		{"synchronous eventbridge invocation", func(c, _ *Stack) { c.Function.Triggers[0].EventBridge.Async = false },
			"eventbridge trigger"},
		{"timer payload mistyped", func(c, _ *Stack) { c.Function.Triggers[1].Timer.Payload = "sweeep" }, "timer trigger"},
		{"timer missing", func(c, _ *Stack) { c.Function.Triggers = c.Function.Triggers[:1] }, "timer trigger"},
		{"purge timer missing", func(c, _ *Stack) { c.Function.Triggers = c.Function.Triggers[:2] }, "timer trigger"},
		{"purge every minute", func(c, _ *Stack) { c.Function.Triggers[2].Timer.Cron = "@every 1m" }, "timer trigger"},
		{"two sweepers, no purge", func(c, _ *Stack) { c.Function.Triggers[2].Timer.Payload = "sweep" }, "timer trigger"},
		{"anonymous http trigger", func(c, _ *Stack) { c.Function.Triggers[3].HTTP.AuthType = "anonymous" }, "http trigger"},
		{"http trigger without GET", func(c, _ *Stack) { c.Function.Triggers[3].HTTP.Methods = []string{"POST"} }, "http trigger"},
		{"no http trigger", func(c, _ *Stack) { c.Function.Triggers = c.Function.Triggers[:3] }, "http trigger"},
		{"too few FC retries", func(c, _ *Stack) { c.Function.Async.MaxRetries = 1 }, "async retries cover MAX_ATTEMPTS"},
		{"no dead-letter queue", func(c, _ *Stack) { c.Function.Async.OnFailure = PerFormat{} },
			"async retries cover MAX_ATTEMPTS"},
		{"timeout shorter than the model call", func(c, _ *Stack) { c.Function.TimeoutS = 60 },
			"timeouts fit the model call and the lease"},
		{"model timeout raised past the function timeout", func(c, _ *Stack) {
			envValue(*c, "LLM_TIMEOUT_SECONDS").(*Input).Default = Lit("100")
		}, "timeouts fit the model call and the lease"},
		{"lease longer than the function", func(c, _ *Stack) {
			envValue(*c, "LEASE_SECONDS").(*Input).Default = Lit("300")
		}, "timeouts fit the model call and the lease"},
		{"no preStop hook", func(_, l *Stack) { l.Function.PreStop = Hook{} }, "timeouts fit the model call and the lease"},
		{"no VPC", func(c, _ *Stack) { c.Function.VPC = nil }, "network, logs and role"},
		{"bucket-wide OSS grant", func(c, _ *Stack) { c.Role.Statements[0].Resources[0] = Sub{"acs:oss:*:*:*"} },
			"role is least privilege"},
		{"delete permission", func(c, _ *Stack) {
			c.Role.Statements[0].Actions = append(c.Role.Statements[0].Actions, "oss:DeleteObject")
		}, "role is least privilege"},
		{"another queue", func(c, _ *Stack) {
			c.Role.Statements[2].Resources[0] = Sub{"acs:mns:", Region, ":", AccountID, ":/queues/other"}
		}, "role is least privilege"},
		{"unknown trigger key", func(c, _ *Stack) { c.Function.Triggers[0] = Trigger{Name: "x"} }, "known properties"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cloud, local := Idemgate(), Local() // fresh copies per case
			c.mutate(&cloud, &local)
			failed := runChecks(cloud, local)
			if failed[c.fails] == nil {
				t.Fatalf("check %q passed on the changed description; failures: %v", c.fails, failed)
			}
			t.Logf("%s: %v", c.fails, failed[c.fails])
		})
	}
}

func dropEnv(env []EnvVar, name string) []EnvVar {
	var out []EnvVar
	for _, e := range env {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

// TestRenderRejects: the generator refuses a description it cannot spell
// in both formats, or whose inputs are not all declared and used.
func TestRenderRejects(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(cloud, local *Stack)
		want   string
	}{
		{"input declared but unused", func(c, _ *Stack) {
			c.Inputs = append(c.Inputs, &Input{Env: "UNUSED", Param: "Unused", Default: Lit("")})
		}, "neither file uses it"},
		{"input used but undeclared", func(c, _ *Stack) {
			c.Function.Env = append(c.Function.Env, EnvVar{"X", &Input{Env: "X", Param: "X", Default: Lit("")}})
		}, "not listed in Stack.Inputs"},
		{"ROS-only value in s.yaml", func(c, _ *Stack) { c.Function.Role = Sub{"acs:ram::", AccountID, ":role/x"} },
			"has no s.yaml spelling"},
		{"required input without a parameter", func(c, _ *Stack) {
			c.Function.Role = envValue(*c, "MYSQL_DSN").(*Input) // fine in s.yaml, not in ROS
			envValue(*c, "MYSQL_DSN").(*Input).Param = ""
		}, "has no parameter name"},
		{"local run reads an export", func(_, l *Stack) {
			l.Function.Env = append(l.Function.Env, EnvVar{"REDIS_URL", &Input{Env: "REDIS_URL", Default: Lit("")}})
		}, "a local run must need no exports"},
		{"trigger of no kind", func(c, _ *Stack) { c.Function.Triggers[1].Timer = nil }, "set exactly one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cloud, local := Idemgate(), Local()
			c.mutate(&cloud, &local)
			_, err := Render(cloud, local)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Render: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestDocsNameEveryInput: docs/deploy.md explains every input of both
// files and shows the local commands s.local.yaml names.
func TestDocsNameEveryInput(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "deploy.md"))
	if err != nil {
		t.Fatal(err)
	}
	a := LocalAccess
	want := []string{"s local invoke -t s.local.yaml -f " + sampleTaskEvent,
		"s config add -a " + a.Alias + " --AccessKeyID " + a.AccessKeyID + " --AccessKeySecret " + a.AccessKeySecret +
			" --AccountID " + a.AccountID}
	for _, in := range Idemgate().Inputs {
		for _, name := range []string{in.Env, in.Param} {
			if name != "" {
				want = append(want, "`"+name+"`")
			}
		}
	}
	for _, w := range want {
		if !bytes.Contains(doc, []byte(w)) {
			t.Errorf("docs/deploy.md does not mention %s", w)
		}
	}
}
