package deploy

import (
	"strings"

	"github.com/idemgate/idemgate/deploy/logq"
)

// Resource names of the stack's logs and results (the function depends on
// LogIndex and Results).
const (
	logstoreRes  = "FunctionLogs"
	indexRes     = "LogIndex"
	dashboardRes = "LogDashboard"
	resultsRes   = "Results"
)

// logsResources are the logstore, its index, one alert per logq.Alert and
// the dashboard of logq.Dashboard.
func logsResources(l *Logs) tree {
	store := GetAtt{logstoreRes, "LogstoreName"}
	out := tree{
		{key: logstoreRes, val: resource("ALIYUN::SLS::Logstore", tree{
			{key: "ProjectName", val: l.Project}, {key: "LogstoreName", val: l.Store}, {key: "TTL", val: l.TTLDays},
			{key: "ShardCount", val: 2}, {key: "AutoSplit", val: true}, {key: "MaxSplitShard", val: 64}})},
		{key: indexRes, val: resource("ALIYUN::SLS::Index", tree{
			{key: "ProjectName", val: l.Project}, {key: "LogstoreName", val: store},
			{key: "FullTextIndex", val: tree{{key: "Enable", val: true}}},
			{key: "KeyIndices", val: keyIndices(), why: "FC writes each line the function prints into \"message\"; " +
				"its JSON keys are indexed so that SQL reads them as \"message.<key>\" (deploy/logq)."}})},
	}
	for _, a := range l.Alerts {
		res := resource("ALIYUN::SLS::Alert", tree{{key: "Project", val: l.Project}, {key: "Detail", val: alertDetail(l, a)}})
		res = append(tree{res[0], {key: "DependsOn", val: indexRes}}, res[1:]...)
		out = append(out, entry{key: alertResName(a), val: res})
	}
	return append(out, entry{key: dashboardRes, val: dashboard(l)})
}

// dashboard is the SLS dashboard <LogStore>-idemgate: logq.Dashboard's
// charts over the last day, two a row (SLS lays charts out on a grid ten
// units wide).
func dashboard(l *Logs) tree {
	var charts []any
	for i, c := range logq.Dashboard() {
		// verbatim: SLS reads the chart's keys in lower camel case.
		display := verbatim{{key: "displayName", val: c.Title}, {key: "xAxis", val: c.X}}
		if len(c.Y) > 0 {
			display = append(display, entry{key: "yAxis", val: c.Y})
		}
		display = append(display, tree{{key: "xPos", val: 5 * (i % 2)}, {key: "yPos", val: 5 * (i / 2)},
			{key: "width", val: 5}, {key: "height", val: 5}}...)
		charts = append(charts, verbatim{
			{key: "title", val: c.Title}, {key: "type", val: c.Type},
			{key: "search", val: verbatim{{key: "logstore", val: GetAtt{logstoreRes, "LogstoreName"}}, {key: "topic", val: ""},
				{key: "query", val: c.SQL}, {key: "start", val: "-86400s"}, {key: "end", val: "now"}}},
			{key: "display", val: display},
		})
	}
	res := resource("ALIYUN::SLS::Dashboard", tree{
		{key: "ProjectName", val: l.Project}, {key: "DashboardName", val: Sub{l.Store, "-idemgate"}},
		{key: "DisplayName", val: "idemgate"},
		{key: "Description", val: "Duplicate rate, claim decisions, failures and run time per minute (deploy/logq)."},
		{key: "Charts", val: charts},
	})
	return append(tree{res[0], {key: "DependsOn", val: indexRes}}, res[1:]...)
}

func alertResName(a logq.Alert) string {
	var b strings.Builder
	b.WriteString("Alert")
	for _, part := range strings.Split(a.Name, "-") {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

func keyIndices() []any {
	var keys []any
	for _, f := range logq.Fields {
		keys = append(keys, tree{{key: "Name", val: f.Name}, {key: "Type", val: f.Type}, {key: "EnableAnalytics", val: true}})
	}
	text := func(name string) tree {
		return tree{{key: "Name", val: name}, {key: "Type", val: "text"}, {key: "EnableAnalytics", val: true}}
	}
	return []any{
		tree{{key: "Name", val: "message"}, {key: "Type", val: "json"}, {key: "EnableAnalytics", val: true},
			{key: "JsonKeyIndices", val: keys}},
		text("functionName"), text("qualifier"), text("instanceID"),
	}
}

// alertDetail is one alert rule (SLS alert version 2.0) on the stack's
// logstore, notifying through the deployer's action policy.
func alertDetail(l *Logs, a logq.Alert) tree {
	query := tree{
		{key: "StoreType", val: "log"}, {key: "Region", val: Regional("{region}")}, {key: "Project", val: l.Project},
		{key: "Store", val: GetAtt{logstoreRes, "LogstoreName"}}, {key: "Query", val: a.Query.SQL()},
		{key: "TimeSpanType", val: "Relative"}, {key: "Start", val: a.Start()}, {key: "End", val: "now"},
		{key: "PowerSqlMode", val: "auto"},
	}
	kv := func(k, v string) tree { return tree{{key: "Key", val: k}, {key: "Value", val: v}} }
	config := tree{
		{key: "Version", val: "2.0"}, {key: "Type", val: "default"}, {key: "Dashboard", val: "internal-alert-analysis"},
		{key: "QueryList", val: []any{query}},
		{key: "GroupConfiguration", val: tree{{key: "Type", val: "no_group"}, {key: "Fields", val: []string{}}}},
		{key: "JoinConfigurations", val: []any{}},
		{key: "SeverityConfigurations", val: []any{tree{{key: "Severity", val: a.Severity},
			{key: "EvalCondition", val: tree{{key: "Condition", val: a.Condition()}}}}}},
		{key: "Labels", val: []any{kv("app", "idemgate"), kv("alert", a.Name)}},
		{key: "Annotations", val: []any{kv("title", a.Title), kv("desc", a.Doc),
			kv("runbook", "docs/operations.md#"+a.Anchor())}},
		{key: "AutoAnnotation", val: true}, {key: "SendResolved", val: true}, {key: "NoDataFire", val: false},
		{key: "Threshold", val: 1},
		{key: "PolicyConfiguration", val: tree{{key: "AlertPolicyId", val: "sls.builtin.dynamic"},
			{key: "ActionPolicyId", val: l.ActionPolicy}, {key: "RepeatInterval", val: "5m"}}},
	}
	return tree{
		{key: "Name", val: Sub{l.Store, "-" + a.Name}},
		{key: "DisplayName", val: a.Title},
		{key: "Description", val: a.Doc + " Runbook: docs/operations.md#" + a.Anchor()},
		{key: "Schedule", val: tree{{key: "Type", val: "FixedRate"}, {key: "Interval", val: "1m"},
			{key: "RunImmediately", val: false}}},
		{key: "Configuration", val: config},
	}
}

// resultsResource is the results bucket with its lifecycle rule; it is kept
// when the stack is deleted (the approved results outlive it).
func resultsResource(r *Results) tree {
	rule := tree{
		{key: "ID", val: "idemgate-expire-inputs-and-attempts"},
		{key: "Prefix", val: r.Prefix}, {key: "Status", val: "Enabled"},
		{key: "Expiration", val: tree{{key: "Days", val: r.ExpireDays}}},
		{key: "Filter", val: tree{{key: "Not", val: tree{{key: "Prefix", val: r.Prefix},
			{key: "Tag", val: []any{tree{{key: "Key", val: r.KeepTag[0]}, {key: "Value", val: r.KeepTag[1]}}}}}}},
			why: "Every object under " + r.Prefix + " is tagged " + r.KeepTag[0] + "=input|attempt|approved when the " +
				"function writes it; ROS has no positive tag filter, so the rule expires all but the approved ones."},
	}
	res := resource("ALIYUN::OSS::Bucket", tree{
		{key: "BucketName", val: r.Bucket}, {key: "AccessControl", val: "private"}, {key: "DeletionForce", val: false},
		{key: "LifecycleConfiguration", val: tree{{key: "Rule", val: []any{rule}}}},
	})
	return append(tree{res[0], {key: "DeletionPolicy", val: "Retain"}}, res[1:]...)
}
