package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/internal/config"
)

// notDeployed lists the variables config.Load reads that the deployment files
// deliberately do not set, with the reason. Every other name in
// config.Variables must be set by both s.yaml and template.yml, and none of
// these may be.
var notDeployed = map[string]string{
	"FC_SERVER_PORT":                  "set by FC from customRuntimeConfig.port",
	"FC_CUSTOM_LISTEN_PORT":           "set by FC from customRuntimeConfig.port",
	"ALIBABA_CLOUD_ACCESS_KEY_ID":     "STS credentials of the function role: FC sends them with every invocation (x-fc-access-key-id)",
	"ALIBABA_CLOUD_ACCESS_KEY_SECRET": "STS credentials of the function role (x-fc-access-key-secret); an AccessKey never goes into a deploy file",
	"ALIBABA_CLOUD_SECURITY_TOKEN":    "STS credentials of the function role (x-fc-security-token)",
	"DASHSCOPE_API_KEY":               "fallback name of LLM_API_KEY, which the deploy files set (and which wins)",
}

// secrets must come from a deploy-time input, never a literal; template.yml
// takes them as NoEcho parameters. required: the input has no default.
var secrets = map[string]struct{ required bool }{
	"MYSQL_DSN":   {required: true},
	"LLM_API_KEY": {required: true},
	"REDIS_URL":   {required: false}, // optional (no fast layer), but holds a password when set
	// optional (notifications unsigned), but a key when set
	"NOTIFY_SIGNING_SECRET": {required: false},
}

// The function must outlive one model call plus the writes after it (MySQL
// complete, OSS attempt output and approved result, notify).
const writeMargin = 30 * time.Second

// Sample events the triggers must produce, from testdata/events.
const (
	sampleTaskEvent  = "testdata/events/eventbridge-single.json"
	sampleTimerEvent = "testdata/events/timer-sweep.json"
)

// check is one named consistency check over both files.
type check struct {
	name string
	run  func(m *manifests) error
}

var checks = []check{
	{"files parse", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			if len(f.problems) > 0 {
				return errors.New(strings.Join(f.problems, "; "))
			}
			return nil
		})
	}},
	{"known properties", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			var errs []error
			if len(f.unknown) > 0 {
				errs = append(errs, fmt.Errorf("unknown function properties %v (the platform ignores or rejects them)", f.unknown))
			}
			for _, t := range f.triggers {
				spec, ok := triggerKeys[t.typ]
				if !ok {
					errs = append(errs, fmt.Errorf("trigger %q: unexpected type %q", t.name, t.typ))
					continue
				}
				for k := range t.config {
					if !spec.known[k] {
						errs = append(errs, fmt.Errorf("trigger %q: unknown triggerConfig key %q", t.name, k))
					}
				}
				for _, k := range sortedKeys(spec.required) {
					if _, ok := t.config[k]; !ok {
						errs = append(errs, fmt.Errorf("trigger %q: triggerConfig needs %q", t.name, k))
					}
				}
			}
			return errors.Join(errs...)
		})
	}},
	{"environment covers config.Variables", func(m *manifests) error {
		var errs []error
		for name := range notDeployed {
			if !slices.Contains(config.Variables, name) {
				errs = append(errs, fmt.Errorf("notDeployed lists %s, which config.Load does not read", name))
			}
		}
		return errors.Join(append(errs, eachFile(m, func(f *function) error {
			var errs []error
			for _, name := range config.Variables {
				_, set := f.env[name]
				why, platform := notDeployed[name]
				switch {
				case set && platform:
					errs = append(errs, fmt.Errorf("sets %s, which must be left alone: %s", name, why))
				case !set && !platform:
					errs = append(errs, fmt.Errorf("does not set %s (set it, or add it to notDeployed with the reason)", name))
				}
			}
			for _, name := range sortedKeys(f.env) {
				if !slices.Contains(config.Variables, name) {
					errs = append(errs, fmt.Errorf("sets %s, which config.Load does not read", name))
				}
				if e := f.env[name]; f.file == "s.yaml" && !e.literal && e.source != name {
					errs = append(errs, fmt.Errorf("%s reads ${env('%s')}: export names must match the function's", name, e.source))
				}
			}
			return errors.Join(errs...)
		}))...)
	}},
	{"secrets", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			var errs []error
			for _, name := range sortedKeys(secrets) {
				e, ok := f.env[name]
				switch {
				case !ok:
					continue // reported by the coverage check
				case e.literal:
					errs = append(errs, fmt.Errorf("%s is written in the file; read it from a deploy-time input", name))
				case secrets[name].required && !e.required:
					errs = append(errs, fmt.Errorf("%s has a default; a secret must be supplied by the deployer", name))
				case f.file == "template.yml" && !e.secret:
					errs = append(errs, fmt.Errorf("%s comes from parameter %q, which is not NoEcho", name, e.source))
				}
			}
			return errors.Join(errs...)
		})
	}},
	{"deployed environment is a valid config", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			cfg, err := deployedConfig(f)
			if err != nil {
				return err
			}
			var errs []error
			if cfg.MySQLDSN == "" {
				errs = append(errs, errors.New("no MYSQL_DSN: the embedded store is per instance, useless in FC"))
			}
			if !cfg.UseOSS() {
				errs = append(errs, errors.New("no OSS: results would stay on the instance's disk"))
			}
			if cfg.LLMModel == config.OfflineModel {
				errs = append(errs, errors.New("the offline model would answer in production"))
			}
			if !strings.HasPrefix(cfg.StateDir, "/tmp/") {
				errs = append(errs, fmt.Errorf("STATE_DIR %q: only /tmp is writable in FC (/code is read-only)", cfg.StateDir))
			}
			return errors.Join(errs...)
		})
	}},
	{"custom-runtime port", func(m *manifests) error {
		want := codeDefaults().ListenPort
		return eachFile(m, func(f *function) error {
			if f.runtime == "go1" {
				return nil
			}
			if f.port != want {
				return fmt.Errorf("port %d, the server listens on %d when FC_SERVER_PORT/FC_CUSTOM_LISTEN_PORT are unset (internal/config)", f.port, want)
			}
			return nil
		})
	}},
	{"runtime, handler and command", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			var errs []error
			switch f.runtime {
			case "custom.debian10", "custom.debian11", "custom.debian12", "custom":
				if !slices.Equal(f.command, []string{"/code/main"}) {
					errs = append(errs, fmt.Errorf("command %q, want [/code/main] (the zip holds main at its root)", f.command))
				}
			case "go1":
				if f.handler != "main" {
					errs = append(errs, fmt.Errorf("go1 handler %q, want main", f.handler))
				}
			default:
				errs = append(errs, fmt.Errorf("runtime %q: want custom.debian10/12 or go1 (a static linux/amd64 binary)", f.runtime))
			}
			if f.handler == "" {
				errs = append(errs, errors.New("no handler (ROS requires one; go1 uses it)"))
			}
			want := map[string]string{"s.yaml": "./target", "template.yml": "oss"}[f.file]
			if f.code != want {
				errs = append(errs, fmt.Errorf("code %q, want %q (scripts/build.sh output)", f.code, want))
			}
			if f.file == "s.yaml" {
				for _, hook := range []string{"pre-deploy", "pre-local"} {
					if !slices.ContainsFunc(f.actions[hook], func(run string) bool { return strings.Contains(run, "scripts/build.sh") }) {
						errs = append(errs, fmt.Errorf("%s does not run scripts/build.sh", hook))
					}
				}
			}
			return errors.Join(errs...)
		})
	}},
	{"eventbridge trigger", func(m *manifests) error {
		sample, err := sampleTask()
		if err != nil {
			return err
		}
		return eachFile(m, func(f *function) error {
			t, ok := f.trigger("eventbridge")
			if !ok {
				return errors.New("no eventbridge trigger")
			}
			var errs []error
			if t.config["triggerEnable"] != true {
				errs = append(errs, errors.New("triggerEnable is not true"))
			}
			if t.config["asyncInvocationType"] != true {
				errs = append(errs, errors.New("asyncInvocationType is not true: FC's async retries and dead-letter destination would not apply"))
			}
			if src, _ := t.config["eventSourceConfig"].(map[string]any); src == nil || src["eventSourceType"] != "Default" {
				errs = append(errs, fmt.Errorf("eventSourceConfig %v, want eventSourceType Default", t.config["eventSourceConfig"]))
			}
			raw, _ := t.config["eventRuleFilterPattern"].(string)
			var pattern map[string]any
			if err := json.Unmarshal([]byte(raw), &pattern); err != nil {
				return errors.Join(append(errs, fmt.Errorf("eventRuleFilterPattern %q is not JSON: %v", raw, err))...)
			}
			types, _ := pattern["type"].([]any)
			if !slices.Contains(types, any(sample)) {
				errs = append(errs, fmt.Errorf("eventRuleFilterPattern %s does not pass type %q (%s)", raw, sample, sampleTaskEvent))
			}
			return errors.Join(errs...)
		})
	}},
	{"timer trigger", func(m *manifests) error {
		var sample struct{ Payload string }
		if err := readJSONFile(sampleTimerEvent, &sample); err != nil {
			return err
		}
		return eachFile(m, func(f *function) error {
			t, ok := f.trigger("timer")
			if !ok {
				return errors.New("no timer trigger")
			}
			var errs []error
			if t.config["enable"] != true {
				errs = append(errs, errors.New("enable is not true"))
			}
			if cron, _ := t.config["cronExpression"].(string); !everyMinute(cron) {
				errs = append(errs, fmt.Errorf("cronExpression %q: want every minute (@every 1m)", cron))
			}
			payload, _ := t.config["payload"].(string)
			if payload != sample.Payload {
				errs = append(errs, fmt.Errorf("payload %q, %s has %q", payload, sampleTimerEvent, sample.Payload))
			}
			// What FC sends for this trigger must parse as the sweep timer.
			body, _ := json.Marshal(map[string]string{"triggerTime": "2026-11-30T07:00:00Z", "triggerName": t.name, "payload": payload})
			inv, err := event.Parse(body)
			switch {
			case err != nil:
				errs = append(errs, fmt.Errorf("the handler rejects this trigger's event: %v", err))
			case inv.Kind != event.KindTimer || inv.Timer == nil || inv.Timer.Payload != event.TimerPayloadSweep:
				errs = append(errs, fmt.Errorf("the handler does not read this trigger's event as the sweep timer (kind %s)", inv.Kind))
			}
			return errors.Join(errs...)
		})
	}},
	{"async retries cover MAX_ATTEMPTS", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			if f.async == nil {
				return errors.New("no async invoke configuration")
			}
			cfg, err := deployedConfig(f)
			if err != nil {
				return err
			}
			attempts := max(cfg.MaxAttempts, codeDefaults().MaxAttempts)
			var errs []error
			if f.async.retries < 0 || f.async.retries > 8 {
				errs = append(errs, fmt.Errorf("maxAsyncRetryAttempts %d: FC allows 0..8", f.async.retries))
			}
			if f.async.retries+1 < attempts {
				errs = append(errs, fmt.Errorf("maxAsyncRetryAttempts %d gives %d deliveries, fewer than MAX_ATTEMPTS %d: tasks would reach the dead-letter queue with attempts left",
					f.async.retries, f.async.retries+1, attempts))
			}
			if age := f.async.maxAge; age < 1 || age > 604800 {
				errs = append(errs, fmt.Errorf("maxAsyncEventAgeInSeconds %d: want 1..604800", age))
			} else if age < f.timeout*(f.async.retries+1) {
				errs = append(errs, fmt.Errorf("maxAsyncEventAgeInSeconds %d is shorter than %d runs of %d s", age, f.async.retries+1, f.timeout))
			}
			dest := f.async.onFailure
			switch {
			case dest == "":
				errs = append(errs, errors.New("no destinationConfig.onFailure: exhausted tasks would vanish"))
			case strings.Contains(dest, "${"):
				// s.yaml reads the ARN at deploy time
			case !strings.HasPrefix(dest, "acs:mns:") || !strings.Contains(dest, ":/queues/") || !strings.HasSuffix(dest, "/messages"):
				errs = append(errs, fmt.Errorf("onFailure %q: want an MNS queue, acs:mns:<region>:<uid>:/queues/<name>/messages", dest))
			}
			return errors.Join(errs...)
		})
	}},
	{"timeout covers the model call", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			cfg, err := deployedConfig(f)
			if err != nil {
				return err
			}
			llm := max(cfg.LLMTimeout, codeDefaults().LLMTimeout)
			if need := llm + writeMargin; time.Duration(f.timeout)*time.Second < need {
				return fmt.Errorf("timeout %d s: LLM_TIMEOUT_SECONDS %v plus %v for the writes needs %v", f.timeout, llm, writeMargin, need)
			}
			return nil
		})
	}},
	{"lifecycle hooks reach the binary", func(m *manifests) error {
		// Without them FC never calls /initialize and /pre-stop: the pools are
		// not warmed and the counters of an instance's last seconds are lost.
		return eachFile(m, func(f *function) error {
			var errs []error
			for _, name := range []string{"initializer", "preStop"} {
				h, ok := f.hooks[name]
				switch {
				case !ok:
					errs = append(errs, fmt.Errorf("no %s hook: FC would never call the binary's endpoint for it", name))
				case h.handler == "":
					errs = append(errs, fmt.Errorf("%s hook without a handler", name))
				case h.timeout < 5 || h.timeout > f.timeout:
					errs = append(errs, fmt.Errorf("%s hook timeout %d s: want 5 s (a MySQL ping or flush) up to the function's %d s", name, h.timeout, f.timeout))
				}
			}
			return errors.Join(errs...)
		})
	}},
	{"network, logs and role", func(m *manifests) error {
		return eachFile(m, func(f *function) error {
			var errs []error
			for _, k := range []string{"vpcId", "vSwitchIds", "securityGroupId"} {
				if f.vpc[k] == "" {
					errs = append(errs, fmt.Errorf("vpcConfig has no %s (Redis and RDS are in a VPC)", k))
				}
			}
			if f.role == "" {
				errs = append(errs, errors.New("no role: OSS would get no credentials"))
			}
			switch {
			case f.file == "s.yaml" && f.logConfig != "auto":
				errs = append(errs, fmt.Errorf("logConfig %q, want auto", f.logConfig))
			case f.file == "template.yml" && (f.logConfig == "" || strings.HasPrefix(f.logConfig, "/") || strings.HasSuffix(f.logConfig, "/")):
				errs = append(errs, fmt.Errorf("LogConfig %q: want Project and Logstore", f.logConfig))
			}
			return errors.Join(errs...)
		})
	}},
	{"role is least privilege", func(m *manifests) error {
		return leastPrivilege(m.ros)
	}},
	{"s.yaml and template.yml agree", func(m *manifests) error {
		s, r := m.s, m.ros
		var errs []error
		same := func(what string, a, b any) {
			if fmt.Sprint(a) != fmt.Sprint(b) {
				errs = append(errs, fmt.Errorf("%s: s.yaml %v, template.yml %v", what, a, b))
			}
		}
		same("runtime", s.runtime, r.runtime)
		same("handler", s.handler, r.handler)
		same("command", s.command, r.command)
		same("port", s.port, r.port)
		same("cpu", s.cpu, r.cpu)
		same("memory", s.memory, r.memory)
		same("disk", s.disk, r.disk)
		same("timeout", s.timeout, r.timeout)
		same("instance concurrency", s.concurrency, r.concurrency)
		same("lifecycle hooks", s.hooks, r.hooks)
		same("internet access", s.internet, r.internet)
		same("environment names", sortedKeys(s.env), sortedKeys(r.env))
		for _, name := range sortedKeys(s.env) {
			if e, ok := r.env[name]; ok && !s.env[name].required && !e.required && !strings.Contains(s.env[name].rendered, "<") {
				same("default of "+name, s.env[name].rendered, e.rendered)
			}
		}
		if s.async != nil && r.async != nil {
			same("maxAsyncRetryAttempts", s.async.retries, r.async.retries)
			same("maxAsyncEventAgeInSeconds", s.async.maxAge, r.async.maxAge)
		} else if (s.async == nil) != (r.async == nil) {
			errs = append(errs, errors.New("only one file configures async invocation"))
		}
		same("triggers", triggerSummary(s), triggerSummary(r))
		return errors.Join(errs...)
	}},
}

// eachFile runs fn on both files and names the file in each error.
func eachFile(m *manifests, fn func(f *function) error) error {
	var errs []error
	for _, f := range []*function{m.s, m.ros} {
		if err := fn(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.file, err))
		}
	}
	return errors.Join(errs...)
}

// runChecks runs every check; the map holds the failures by check name.
func runChecks(m *manifests) map[string]error {
	failed := map[string]error{}
	for _, c := range checks {
		if err := c.run(m); err != nil {
			failed[c.name] = err
		}
	}
	return failed
}

func codeDefaults() config.Config {
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		panic("config.Load with an empty environment: " + err.Error())
	}
	return cfg
}

// deployedConfig is what config.Load makes of the environment a file deploys
// (defaults, placeholders for required inputs, nothing from the platform).
func deployedConfig(f *function) (config.Config, error) {
	for name, e := range f.env {
		if e.required && e.value == "" {
			return config.Config{}, fmt.Errorf("%s is required: give the test a placeholder for it", name)
		}
	}
	cfg, err := config.Load(func(name string) string { return f.env[name].value })
	if err != nil {
		return cfg, fmt.Errorf("config.Load on the deployed environment: %w", err)
	}
	return cfg, nil
}

// sampleTask is the event type of the sample EventBridge event, which the
// handler must accept as a task.
func sampleTask() (string, error) {
	var sample struct{ Type string }
	if err := readJSONFile(sampleTaskEvent, &sample); err != nil {
		return "", err
	}
	body, err := readFile(sampleTaskEvent)
	if err != nil {
		return "", err
	}
	inv, err := event.Parse(body)
	if err != nil || inv.Kind != event.KindSingle || len(inv.Tasks) != 1 || inv.Tasks[0].EventType != sample.Type {
		return "", fmt.Errorf("%s is not accepted as one task of type %q: %v", sampleTaskEvent, sample.Type, err)
	}
	return sample.Type, nil
}

func everyMinute(cron string) bool {
	switch strings.Join(strings.Fields(cron), " ") {
	case "@every 1m", "@every 60s", "0 * * * * *", "0 */1 * * * *":
		return true
	}
	return false
}

func triggerSummary(f *function) []string {
	var out []string
	for _, t := range f.triggers {
		cfg, _ := json.Marshal(t.config) // map keys sorted: comparable across files
		out = append(out, t.name+"/"+t.typ+" "+string(cfg))
	}
	slices.Sort(out)
	return out
}

// leastPrivilege: only what the function does — create and read objects under
// tasks/ of the results bucket, write its own logstore, send to its DLQ.
func leastPrivilege(f *function) error {
	if len(f.policy) == 0 {
		return errors.New("template.yml: no role with an inline policy")
	}
	allowed := map[string][]string{
		// HeadObject is authorised by oss:GetObject; a PUT with x-oss-tagging needs oss:PutObjectTagging.
		"oss": {"oss:PutObject", "oss:PutObjectTagging", "oss:GetObject"},
		"log": {"log:PostLogStoreLogs"},
		"mns": {"mns:SendMessage"},
	}
	bucket := f.env["OSS_BUCKET"].rendered
	seen := map[string]bool{}
	var errs []error
	for _, st := range f.policy {
		if st.effect != "Allow" {
			continue
		}
		services := map[string]bool{}
		for _, a := range st.actions {
			svc, _, _ := strings.Cut(a, ":")
			services[svc] = true
			seen[a] = true
			if !slices.Contains(allowed[svc], a) {
				errs = append(errs, fmt.Errorf("action %q is not needed by the function", a))
			}
		}
		if len(services) != 1 {
			errs = append(errs, fmt.Errorf("statement %v mixes services; keep one per statement", st.actions))
			continue
		}
		for _, res := range st.resources {
			switch {
			case res == "*" || strings.HasSuffix(res, ":*"):
				errs = append(errs, fmt.Errorf("resource %q: no wildcard grants", res))
			case services["oss"] && res != "acs:oss:*:"+rosPseudo["ALIYUN::AccountId"]+":"+bucket+"/tasks/*":
				errs = append(errs, fmt.Errorf("OSS resource %q, want only %s/tasks/* (the results bucket OSS_BUCKET names)", res, bucket))
			case services["log"] && !strings.HasSuffix(res, ":project/"+strings.Replace(f.logConfig, "/", "/logstore/", 1)):
				errs = append(errs, fmt.Errorf("log resource %q is not the function's logstore %s", res, f.logConfig))
			case services["mns"] && (f.async == nil || (res != f.async.onFailure && res+"/messages" != f.async.onFailure)):
				errs = append(errs, fmt.Errorf("MNS resource %q is not the dead-letter queue", res))
			}
		}
	}
	for _, a := range []string{"oss:PutObject", "oss:PutObjectTagging", "oss:GetObject", "log:PostLogStoreLogs", "mns:SendMessage"} {
		if !seen[a] {
			errs = append(errs, fmt.Errorf("the role lacks %s", a))
		}
	}
	return errors.Join(errs...)
}
