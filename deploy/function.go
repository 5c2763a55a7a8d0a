package deploy

import (
	"encoding/json"
	"fmt"
)

// The trees below are spelled like the fc3 component's properties; ROS
// spells the same properties with a capital first letter, so both files are
// rendered from them. A property one format lacks is a PerFormat with a nil
// side.

// functionProps are the function's properties, comments included.
func functionProps(f Function) tree {
	return tree{
		{key: "functionName", val: f.Name},
		{key: "description", val: f.Description},
		{key: "runtime", val: f.Runtime, why: "custom.debian12 works unchanged (static binary); go1 needs handler: main " +
			"and no customRuntimeConfig (the binary sees FC_RUNTIME_API and runs the go1 loop) — see docs/deploy.md, " +
			"\"Switch the runtime\"."},
		{key: "handler", val: f.Handler},
		{key: "code", val: f.Code},
		{key: "customRuntimeConfig", val: tree{{key: "command", val: f.Command}, {key: "port", val: f.Port}}},
		{key: "cpu", val: f.CPU},
		{key: "memorySize", val: f.MemoryMB},
		{key: "diskSize", val: f.DiskMB},
		{key: "timeout", val: f.TimeoutS, why: fmt.Sprintf("One invocation may wait LLM_TIMEOUT_SECONDS (60) for the "+
			"model, then write MySQL, OSS and notify: %d s leaves room for those writes. Keep timeout >= "+
			"LLM_TIMEOUT_SECONDS + 30 and >= LEASE_SECONDS (the deploy tests check both).", f.TimeoutS)},
		{key: "instanceLifecycleConfig", val: tree{{key: "initializer", val: hookTree(f.Initializer)},
			{key: "preStop", val: hookTree(f.PreStop)}},
			why: "FC calls the custom runtime's POST /initialize (checks that MySQL answers and is migrated and that " +
				"Redis is recent enough, warming the pools) and GET /pre-stop (flushes the per-minute counters and the " +
				"batched finish marks; the pools stay open, as FC may thaw the instance) only when these hooks are " +
				"configured; for a custom runtime the handler is just 'true'."},
		{key: "instanceConcurrency", val: f.InstanceConcurrency},
		{key: "internetAccess", val: f.InternetAccess},
		{key: "role", val: f.Role},
		{key: "vpcConfig", val: vpcTree(f.VPC)},
		{key: "logConfig", val: f.Logs},
		{key: "environmentVariables", val: envTree(f.Env)},
	}
}

func hookTree(h Hook) tree {
	return tree{{key: "handler", val: h.Handler}, {key: "timeout", val: h.TimeoutS}}
}

func vpcTree(v *VPC) any {
	if v == nil {
		return nil
	}
	return tree{{key: "vpcId", val: v.VpcID}, {key: "vSwitchIds", val: []any{v.VSwitchID}},
		{key: "securityGroupId", val: v.SecurityGroupID}}
}

func envTree(env []EnvVar) verbatim {
	t := make(verbatim, 0, len(env))
	for _, e := range env {
		t = append(t, entry{key: e.Name, val: e.Value})
	}
	return t
}

// asyncTree is the asynchronous invocation configuration (s.yaml: a
// property of the function; ROS: a resource of its own).
func asyncTree(a *Async) tree {
	return tree{
		{key: "maxAsyncRetryAttempts", val: a.MaxRetries, why: fmt.Sprintf("FC retries after the first attempt: "+
			"%d retries = %d deliveries >= MAX_ATTEMPTS (3), so the task budget, not FC, decides; the extra delivery "+
			"is answered FAILED_FINAL at once and lands in the dead-letter queue.", a.MaxRetries, a.MaxRetries+1)},
		{key: "maxAsyncEventAgeInSeconds", val: a.MaxEventAgeS},
		{key: "destinationConfig", val: tree{{key: "onFailure", val: tree{{key: "destination", val: a.OnFailure}}}}},
	}
}

// triggerTree is one trigger; its triggerConfig keeps the FC API's
// spelling in both formats.
func triggerTree(t Trigger) (tree, error) {
	var typ string
	var cfg verbatim
	switch {
	case t.EventBridge != nil && t.Timer == nil && t.HTTP == nil:
		pattern, err := json.Marshal(map[string][]string{"type": t.EventBridge.EventTypes})
		if err != nil {
			return nil, err
		}
		typ = "eventbridge"
		cfg = verbatim{
			{key: "triggerEnable", val: true},
			{key: "asyncInvocationType", val: t.EventBridge.Async, why: "true = FC asynchronous invocation (queue, " +
				"retries, the dead-letter destination). Check the trigger's invocation method in the console after the " +
				"first deploy: newer localised FC API pages state the opposite meaning for this flag."},
			{key: "eventRuleFilterPattern", val: string(pattern)},
			{key: "eventSourceConfig", val: verbatim{{key: "eventSourceType", val: t.EventBridge.SourceType}}},
		}
	case t.Timer != nil && t.EventBridge == nil && t.HTTP == nil:
		typ = "timer"
		cfg = verbatim{{key: "cronExpression", val: t.Timer.Cron}, {key: "enable", val: true},
			{key: "payload", val: t.Timer.Payload}}
	case t.HTTP != nil && t.EventBridge == nil && t.Timer == nil:
		typ = "http"
		cfg = verbatim{
			{key: "authType", val: t.HTTP.AuthType, why: "function = FC's signature authentication: a caller signs " +
				"with a RAM identity allowed fc:InvokeFunction. Never anonymous: the API runs paid model calls (docs/api.md)."},
			{key: "methods", val: t.HTTP.Methods},
			{key: "disableURLInternet", val: false, why: "the default public URL; set true to reach the API only " +
				"through a custom domain or the VPC endpoint"},
		}
	default:
		return nil, fmt.Errorf("trigger %q: set exactly one of EventBridge, Timer and HTTP", t.Name)
	}
	return tree{{key: "triggerName", val: t.Name}, {key: "triggerType", val: typ}, {key: "qualifier", val: t.Qualifier},
		{key: "description", val: t.Description}, {key: "triggerConfig", val: cfg}}, nil
}
