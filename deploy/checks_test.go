package deploy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler/event"
	"github.com/idemgate/idemgate/internal/config"
)

// repoRoot is where s.yaml, template.yml and scripts/ live (tests run in deploy/).
const repoRoot = ".."

// check is one named check of the description against the code.
type check struct {
	name string
	run  func(cloud, local Stack) error
}

var checks = []check{
	{"environment covers config.Variables", checkEnvNames},
	{"secrets come from inputs", checkSecrets},
	{"deployed environment is a valid config", checkDeployedConfig},
	{"local environment needs Docker alone", checkLocal},
	{"custom-runtime port and command", checkRuntime},
	{"eventbridge trigger", checkEventBridge},
	{"timer trigger", checkTimer},
	{"http trigger", checkHTTP},
	{"async retries cover MAX_ATTEMPTS", checkAsync},
	{"timeouts fit the model call and the lease", checkTimeouts},
	{"network, logs and role", checkCloudOnly},
	{"role is least privilege", checkLeastPrivilege},
	{"known properties", checkKnownProperties},
	{"logs, index and alerts", checkLogs},
	{"results bucket and its lifecycle rule", checkResults},
	{"ROS properties of logs and results", checkROSProperties},
}

// runChecks runs every check; the map holds the failures by check name.
func runChecks(cloud, local Stack) map[string]error {
	failed := map[string]error{}
	for _, c := range checks {
		if err := c.run(cloud, local); err != nil {
			failed[c.name] = err
		}
	}
	return failed
}

func checkEnvNames(cloud, local Stack) error {
	var errs []error
	unset := map[string]bool{}
	for _, u := range cloud.NotDeployed {
		for _, name := range strings.Fields(u.Names) {
			unset[name] = true
			if !slices.Contains(config.Variables, name) {
				errs = append(errs, fmt.Errorf("NotDeployed lists %s, which config.Load does not read", name))
			}
		}
	}
	set := map[string]bool{}
	for _, e := range cloud.Function.Env {
		set[e.Name] = true
		if in, ok := e.Value.(*Input); ok && in.Env != e.Name {
			errs = append(errs, fmt.Errorf("%s reads the export %s: export names must match the function's", e.Name, in.Env))
		}
	}
	for _, name := range config.Variables {
		switch {
		case set[name] && unset[name]:
			errs = append(errs, fmt.Errorf("sets %s, which NotDeployed leaves to the platform", name))
		case !set[name] && !unset[name]:
			errs = append(errs, fmt.Errorf("does not set %s (set it, or add it to NotDeployed with the reason)", name))
		}
	}
	for _, e := range append(cloud.Function.Env, local.Function.Env...) {
		if !slices.Contains(config.Variables, e.Name) {
			errs = append(errs, fmt.Errorf("sets %s, which config.Load does not read", e.Name))
		}
		if unset[e.Name] {
			errs = append(errs, fmt.Errorf("sets %s, which NotDeployed leaves to the platform", e.Name))
		}
	}
	return errors.Join(errs...)
}

// secrets must come from a deploy-time input marked secret (NoEcho in ROS);
// required: the input has no default.
var secrets = map[string]bool{"MYSQL_DSN": true, "LLM_API_KEY": true, "REDIS_URL": false, "NOTIFY_SIGNING_SECRET": false}

func checkSecrets(cloud, _ Stack) error {
	var errs []error
	for _, e := range cloud.Function.Env {
		required, secret := secrets[e.Name]
		if !secret {
			continue
		}
		in, ok := e.Value.(*Input)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s is written in the file; read it from a deploy-time input", e.Name))
		case !in.Secret:
			errs = append(errs, fmt.Errorf("%s comes from an input that is not secret (ROS would echo it)", e.Name))
		case required && !in.Required():
			errs = append(errs, fmt.Errorf("%s has a default; a secret must be supplied by the deployer", e.Name))
		}
	}
	return errors.Join(errs...)
}

func checkDeployedConfig(cloud, _ Stack) error {
	return eachFormat(func(f format) error {
		cfg, err := deployedConfig(cloud, f)
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
}

func checkLocal(_, local Stack) error {
	var errs []error
	env := map[string]string{}
	for _, e := range local.Function.Env {
		lit, ok := e.Value.(Lit)
		if !ok {
			errs = append(errs, fmt.Errorf("%s is not a literal: a local run must need no exports", e.Name))
		}
		env[e.Name] = string(lit)
	}
	cfg, err := config.Load(func(name string) string { return env[name] })
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("config.Load on the local environment: %w", err))...)
	}
	if cfg.MySQLDSN != "" || cfg.RedisURL != "" || cfg.UseOSS() {
		errs = append(errs, errors.New("the local configuration reaches MySQL, Redis or OSS: Docker alone must do"))
	}
	if cfg.LLMModel != config.OfflineModel {
		errs = append(errs, fmt.Errorf("local model %q: want %s (no key, no network)", cfg.LLMModel, config.OfflineModel))
	}
	if !strings.HasPrefix(cfg.StateDir, "/code/") {
		errs = append(errs, fmt.Errorf("local STATE_DIR %q: only /code (the mounted ./target) outlives the container", cfg.StateDir))
	}
	f := local.Function
	if f.VPC != nil || f.Role != nil || f.Logs != nil || f.Async != nil || len(f.Triggers) > 0 || local.Role != nil {
		errs = append(errs, errors.New("the local configuration has a VPC, role, logs, async configuration or triggers"))
	}
	return errors.Join(errs...)
}

func checkRuntime(cloud, local Stack) error {
	want := codeDefaults().ListenPort
	var errs []error
	for _, f := range []Function{cloud.Function, local.Function} {
		if f.Port != want {
			errs = append(errs, fmt.Errorf("port %d, the server listens on %d when FC_SERVER_PORT/FC_CUSTOM_LISTEN_PORT are unset (internal/config)", f.Port, want))
		}
		if !strings.HasPrefix(f.Runtime, "custom") {
			errs = append(errs, fmt.Errorf("runtime %q: want custom.debian10/12 (go1 drops customRuntimeConfig; see docs/deploy.md)", f.Runtime))
		}
		if !slices.Equal(f.Command, []string{"/code/main", "serve"}) {
			errs = append(errs, fmt.Errorf("command %q, want [/code/main serve] (the zip holds main at its root; serve, not a bare main, which prints its usage outside FC)", f.Command))
		}
		if f.Handler == "" {
			errs = append(errs, errors.New("no handler (ROS requires one; go1 uses it)"))
		}
	}
	return errors.Join(errs...)
}

func checkEventBridge(cloud, _ Stack) error {
	sample, err := sampleTask()
	if err != nil {
		return err
	}
	var found []Trigger
	for _, t := range cloud.Function.Triggers {
		if t.EventBridge != nil {
			found = append(found, t)
		}
	}
	if len(found) != 1 {
		return fmt.Errorf("%d eventbridge triggers, want one", len(found))
	}
	eb, errs := found[0].EventBridge, []error(nil)
	if !eb.Async {
		errs = append(errs, errors.New("synchronous: FC's async retries and dead-letter destination would not apply"))
	}
	if eb.SourceType != "Default" {
		errs = append(errs, fmt.Errorf("event source %q, want Default (the default bus)", eb.SourceType))
	}
	if !slices.Contains(eb.EventTypes, sample) {
		errs = append(errs, fmt.Errorf("event types %v do not pass %q (%s)", eb.EventTypes, sample, sampleTaskEvent))
	}
	return errors.Join(errs...)
}

// timers are the timer triggers the function needs, by payload: the sample
// event FC sends and the schedule.
var timers = map[string]struct {
	sample, schedule string
	cron             func(string) bool
}{
	event.TimerPayloadSweep: {sampleTimerEvent, "every minute (@every 1m)", func(c string) bool {
		return slices.Contains([]string{"@every 1m", "@every 60s", "0 * * * * *", "0 */1 * * * *"}, c)
	}},
	event.TimerPayloadPurge: {samplePurgeEvent, "once a day (s m h * * *)", dailyCron.MatchString},
}

var dailyCron = regexp.MustCompile(`^(CRON_TZ=\S+ )?[0-5]?[0-9] [0-5]?[0-9] (1?[0-9]|2[0-3]) \* \* \*$|^@every 24h$`)

// checkHTTP: one HTTP trigger serves the task API (handler/httpapi), its
// callers authenticated by FC: an anonymous trigger would let anyone run
// paid model calls.
func checkHTTP(cloud, _ Stack) error {
	var found []*HTTP
	for _, t := range cloud.Function.Triggers {
		if t.HTTP != nil {
			found = append(found, t.HTTP)
		}
	}
	if len(found) != 1 {
		return fmt.Errorf("%d http triggers, want one", len(found))
	}
	var errs []error
	if h := found[0]; h.AuthType != "function" {
		errs = append(errs, fmt.Errorf("authType %q, want function (signature authentication; docs/api.md)", h.AuthType))
	}
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		if !slices.Contains(found[0].Methods, m) {
			errs = append(errs, fmt.Errorf("method %s missing: the API is POST /tasks and GET /tasks/{key}", m))
		}
	}
	return errors.Join(errs...)
}

func checkTimer(cloud, _ Stack) error {
	var errs []error
	seen := map[string]int{}
	for _, t := range cloud.Function.Triggers {
		if t.Timer == nil {
			continue
		}
		want, ok := timers[t.Timer.Payload]
		if !ok {
			errs = append(errs, fmt.Errorf("timer %s: payload %q is no timer action", t.Name, t.Timer.Payload))
			continue
		}
		seen[t.Timer.Payload]++
		var sample struct{ Payload string }
		if err := readJSONFile(want.sample, &sample); err != nil {
			return err
		}
		if !want.cron(t.Timer.Cron) {
			errs = append(errs, fmt.Errorf("timer %s: cron %q, want %s", t.Name, t.Timer.Cron, want.schedule))
		}
		if t.Timer.Payload != sample.Payload {
			errs = append(errs, fmt.Errorf("payload %q, %s has %q", t.Timer.Payload, want.sample, sample.Payload))
		}
		// What FC sends for this trigger must parse as its timer.
		body, _ := json.Marshal(map[string]string{"triggerTime": "2026-11-30T07:00:00Z", "triggerName": t.Name, "payload": t.Timer.Payload})
		inv, err := event.Parse(body)
		if err != nil || inv.Kind != event.KindTimer || inv.Timer == nil || inv.Timer.Payload != t.Timer.Payload {
			errs = append(errs, fmt.Errorf("the handler does not read timer %s's event as its timer: %v", t.Name, err))
		}
	}
	for payload := range timers {
		if seen[payload] != 1 {
			errs = append(errs, fmt.Errorf("%d timer triggers with payload %q, want one", seen[payload], payload))
		}
	}
	return errors.Join(errs...)
}

func checkAsync(cloud, _ Stack) error {
	f := cloud.Function
	if f.Async == nil {
		return errors.New("no async invoke configuration")
	}
	a := f.Async
	return eachFormat(func(fm format) error {
		cfg, err := deployedConfig(cloud, fm)
		if err != nil {
			return err
		}
		var errs []error
		deliveries := a.MaxRetries + 1
		if a.MaxRetries < 0 || a.MaxRetries > 8 {
			errs = append(errs, fmt.Errorf("maxAsyncRetryAttempts %d: FC allows 0..8", a.MaxRetries))
		}
		if deliveries < cfg.MaxAttempts {
			errs = append(errs, fmt.Errorf("%d deliveries, fewer than MAX_ATTEMPTS %d: tasks would reach the dead-letter queue with attempts left",
				deliveries, cfg.MaxAttempts))
		}
		if a.MaxEventAgeS < f.TimeoutS*deliveries || a.MaxEventAgeS > 604800 {
			errs = append(errs, fmt.Errorf("maxAsyncEventAgeInSeconds %d: want %d runs of %d s, at most 604800", a.MaxEventAgeS, deliveries, f.TimeoutS))
		}
		dest, err := resolve(a.OnFailure, fm)
		if err != nil || !strings.HasPrefix(dest, "acs:mns:") || !strings.Contains(dest, ":/queues/") || !strings.HasSuffix(dest, "/messages") {
			errs = append(errs, fmt.Errorf("dead-letter destination %q (%v): want acs:mns:<region>:<uid>:/queues/<name>/messages", dest, err))
		}
		return errors.Join(errs...)
	})
}

// writeMargin: the function must outlive one model call plus the writes
// after it (MySQL complete, OSS attempt output and approved result, notify).
const writeMargin = 30 * time.Second

func checkTimeouts(cloud, local Stack) error {
	return eachFormat(func(fm format) error {
		cfg, err := deployedConfig(cloud, fm)
		if err != nil {
			return err
		}
		var errs []error
		for _, f := range []Function{cloud.Function, local.Function} {
			timeout := time.Duration(f.TimeoutS) * time.Second
			if need := cfg.LLMTimeout + writeMargin; timeout < need {
				errs = append(errs, fmt.Errorf("timeout %v: LLM_TIMEOUT_SECONDS %v plus %v for the writes needs %v", timeout, cfg.LLMTimeout, writeMargin, need))
			}
			// FC kills the instance at the timeout; a longer lease only keeps
			// its task "in progress" for every duplicate after the kill.
			if cfg.Lease > timeout {
				errs = append(errs, fmt.Errorf("LEASE_SECONDS %v exceeds the function timeout %v", cfg.Lease, timeout))
			}
			for name, h := range map[string]Hook{"initializer": f.Initializer, "preStop": f.PreStop} {
				// Without them FC never calls /initialize and /pre-stop: the pools
				// are not warmed and an instance's last counters are lost.
				if h.Handler == "" || h.TimeoutS < 5 || h.TimeoutS > f.TimeoutS {
					errs = append(errs, fmt.Errorf("%s hook %+v: want a handler and 5 s (a MySQL ping or flush) up to the function's %d s", name, h, f.TimeoutS))
				}
			}
		}
		return errors.Join(errs...)
	})
}

func checkCloudOnly(cloud, _ Stack) error {
	f := cloud.Function
	var errs []error
	if f.VPC == nil || f.VPC.VpcID == nil || f.VPC.VSwitchID == nil || f.VPC.SecurityGroupID == nil {
		errs = append(errs, errors.New("no complete vpcConfig (Redis and RDS are in a VPC)"))
	}
	if f.Role == nil || cloud.Role == nil {
		errs = append(errs, errors.New("no role: OSS would get no credentials"))
	}
	if f.Logs == nil {
		errs = append(errs, errors.New("no logConfig: the function's logs would be lost"))
	}
	return errors.Join(errs...)
}

// checkLeastPrivilege: only what the function does — create and read
// objects under tasks/ of the results bucket, write its own logstore, send
// to its dead-letter queue.
func checkLeastPrivilege(cloud, _ Stack) error {
	if cloud.Role == nil {
		return errors.New("no role")
	}
	// A PUT with x-oss-tagging needs oss:PutObjectTagging.
	allowed := map[string][]string{"oss": {"oss:PutObject", "oss:PutObjectTagging", "oss:GetObject"},
		"log": {"log:PostLogStoreLogs"}, "mns": {"mns:SendMessage"}}
	bucket, _ := resolve(envValue(cloud, "OSS_BUCKET"), rosFormat)
	logs, _ := cloud.Function.Logs.(PerFormat).ROS.(tree)
	project, _ := resolve(logs.get("Project"), rosFormat)
	store, _ := resolve(logs.get("Logstore"), rosFormat)
	dlq, _ := resolve(cloud.Function.Async.OnFailure, rosFormat)
	seen := map[string]bool{}
	var errs []error
	for _, st := range cloud.Role.Statements {
		services := map[string]bool{}
		for _, a := range st.Actions {
			svc, _, _ := strings.Cut(a, ":")
			services[svc], seen[a] = true, true
			if !slices.Contains(allowed[svc], a) {
				errs = append(errs, fmt.Errorf("action %q is not needed by the function", a))
			}
		}
		if len(services) != 1 {
			errs = append(errs, fmt.Errorf("statement %v mixes services; keep one per statement", st.Actions))
			continue
		}
		for _, sub := range st.Resources {
			res, err := resolve(sub, rosFormat)
			switch {
			case err != nil:
				errs = append(errs, err)
			case res == "*" || strings.HasSuffix(res, ":*"):
				errs = append(errs, fmt.Errorf("resource %q: no wildcard grants", res))
			case services["oss"] && res != "acs:oss:*:"+pseudoValues[AccountID]+":"+bucket+"/tasks/*":
				errs = append(errs, fmt.Errorf("OSS resource %q, want only %s/tasks/* (the bucket OSS_BUCKET names)", res, bucket))
			case services["log"] && !strings.HasSuffix(res, ":project/"+project+"/logstore/"+store):
				errs = append(errs, fmt.Errorf("log resource %q is not the function's logstore %s/%s", res, project, store))
			case services["mns"] && res != dlq && res+"/messages" != dlq:
				errs = append(errs, fmt.Errorf("MNS resource %q is not the dead-letter queue %s", res, dlq))
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

// checkKnownProperties: s verify does not reject unknown property names, so
// a typo such as "memroySize" would deploy silently with the default.
func checkKnownProperties(cloud, _ Stack) error {
	var errs []error
	for _, e := range functionProps(cloud.Function) {
		ros := strings.ToUpper(e.key[:1]) + e.key[1:]
		if !fc3Props[e.key] || !rosFunctionProps[ros] {
			errs = append(errs, fmt.Errorf("function property %q (ROS %q) is unknown to fc3 or ROS", e.key, ros))
		}
	}
	for _, t := range cloud.Function.Triggers {
		tt, err := triggerTree(t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		typ := tt.get("triggerType").(string)
		for _, e := range tt.get("triggerConfig").(verbatim) {
			if !triggerKeys[typ][e.key] {
				errs = append(errs, fmt.Errorf("trigger %q: unknown triggerConfig key %q", t.Name, e.key))
			}
		}
	}
	return errors.Join(errs...)
}

func (t tree) get(key string) any {
	for _, e := range t {
		if e.key == key {
			return e.val
		}
	}
	return nil
}

func (t verbatim) get(key string) any { return tree(t).get(key) }

var fc3Props = setOf("annotations", "asyncInvokeConfig", "code", "concurrencyConfig", "cpu",
	"customContainerConfig", "customDNS", "customRuntimeConfig", "description", "diskSize",
	"enableLongLiving", "endpoint", "environmentVariables", "functionName", "gpuConfig", "handler",
	"instanceConcurrency", "instanceIsolationMode", "instanceLifecycleConfig", "internetAccess", "layers",
	"logConfig", "memorySize", "nasConfig", "ossMountConfig", "provisionConfig", "region", "resourceGroupId",
	"role", "runtime", "scalingConfig", "sessionAffinity", "sessionAffinityConfig", "supplement", "tags",
	"timeout", "tracingConfig", "triggers", "vpcBinding", "vpcConfig")

var rosFunctionProps = setOf("FunctionName", "Handler", "Runtime", "Cpu", "CustomContainerConfig", "Code",
	"CustomRuntimeConfig", "CustomDns", "Description", "DiskSize", "EnvironmentVariables", "GpuConfig",
	"InstanceLifecycleConfig", "InternetAccess", "InstanceConcurrency", "Layers", "LogConfig", "MemorySize",
	"NasConfig", "OssMountConfig", "Role", "TracingConfig", "Timeout", "VpcConfig", "DisableOndemand",
	"SessionAffinityConfig", "InstanceIsolationMode", "SessionAffinity", "Tags")

// Trigger configuration keys of the FC API (CreateTrigger), per trigger type.
var triggerKeys = map[string]map[string]bool{
	"timer":       setOf("cronExpression", "enable", "payload"),
	"http":        setOf("authType", "authConfig", "methods", "disableURLInternet", "corsConfig"),
	"eventbridge": setOf("triggerEnable", "asyncInvocationType", "eventRuleFilterPattern", "eventSourceConfig", "eventSinkConfig", "runOptions"),
}

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// ---- what the description's values become once deployed

// placeholders stand in for the inputs without a default, by export or
// parameter name (the values .ci/run gives s-verify).
var placeholders = map[string]string{
	"MYSQL_DSN": "ci:ci@tcp(127.0.0.1:3306)/idemgate", "LLM_API_KEY": "sk-ci", "OSS_BUCKET": "idemgate-ci",
	"ROLE_ARN": "acs:ram::1234567890123456:role/idemgate-fc", "VPC_ID": "vpc-ci", "VSWITCH_ID": "vsw-ci",
	"SECURITY_GROUP_ID": "sg-ci", "DLQ_ARN": "acs:mns:cn-hangzhou:1234567890123456:/queues/idemgate-dlq/messages",
	"CodeBucket": "idemgate-code", "LogProject": "idemgate-logs", "AlertActionPolicyId": "idemgate-oncall",
}

var pseudoValues = map[Pseudo]string{AccountID: "1234567890123456", Region: "cn-hangzhou"}

// resolve is the string a value becomes in format f: inputs take their
// default or the placeholder, the region is cn-hangzhou. It reads only this
// package's own value kinds, not YAML.
func resolve(v any, f format) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case Lit:
		return string(v), nil
	case PerFormat:
		if f == sdevsFormat {
			return resolve(v.S, f)
		}
		return resolve(v.ROS, f)
	case Regional:
		return strings.ReplaceAll(string(v), "{region}", pseudoValues[Region]), nil
	case *Input:
		if !v.Required() {
			return resolve(v.Default, f)
		}
		for _, name := range []string{v.Env, v.Param} {
			if p, ok := placeholders[name]; ok && name != "" {
				return p, nil
			}
		}
		return "", fmt.Errorf("input %s%s is required: give the tests a placeholder for it", v.Env, v.Param)
	case Sub:
		var b strings.Builder
		for _, part := range v {
			s, err := resolve(part, f)
			if err != nil {
				return "", err
			}
			b.WriteString(s)
		}
		return b.String(), nil
	case Pseudo:
		return pseudoValues[v], nil
	}
	return "", fmt.Errorf("cannot resolve %T", v)
}

func envValue(st Stack, name string) Value {
	for _, e := range st.Function.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return nil
}

// deployedConfig is what config.Load makes of the environment a file
// deploys (defaults, placeholders for required inputs, nothing from the
// platform).
func deployedConfig(st Stack, f format) (config.Config, error) {
	env := map[string]string{}
	for _, e := range st.Function.Env {
		v, err := resolve(e.Value, f)
		if err != nil {
			return config.Config{}, err
		}
		env[e.Name] = v
	}
	cfg, err := config.Load(func(name string) string { return env[name] })
	if err != nil {
		return cfg, fmt.Errorf("config.Load on the deployed environment: %w", err)
	}
	return cfg, nil
}

// eachFormat runs fn for s.yaml and template.yml and names the file in each error.
func eachFormat(fn func(f format) error) error {
	var errs []error
	for f, name := range map[format]string{sdevsFormat: "s.yaml", rosFormat: "template.yml"} {
		if err := fn(f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func codeDefaults() config.Config {
	cfg, err := config.Load(func(string) string { return "" })
	if err != nil {
		panic("config.Load with an empty environment: " + err.Error())
	}
	return cfg
}

// Sample events the triggers must produce, from testdata/events.
const (
	sampleTaskEvent  = "testdata/events/eventbridge-single.json"
	sampleTimerEvent = "testdata/events/timer-sweep.json"
	samplePurgeEvent = "testdata/events/timer-purge.json"
)

// sampleTask is the event type of the sample EventBridge event, which the
// handler must accept as one task.
func sampleTask() (string, error) {
	body, err := os.ReadFile(filepath.Join(repoRoot, sampleTaskEvent))
	if err != nil {
		return "", err
	}
	var sample struct{ Type string }
	if err := json.Unmarshal(body, &sample); err != nil {
		return "", fmt.Errorf("%s: %w", sampleTaskEvent, err)
	}
	inv, err := event.Parse(body)
	if err != nil || inv.Kind != event.KindSingle || len(inv.Tasks) != 1 || inv.Tasks[0].EventType != sample.Type {
		return "", fmt.Errorf("%s is not accepted as one task of type %q: %v", sampleTaskEvent, sample.Type, err)
	}
	return sample.Type, nil
}

func readJSONFile(path string, v any) error {
	b, err := os.ReadFile(filepath.Join(repoRoot, path))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
