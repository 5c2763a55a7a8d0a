package deploy

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/idemgate/idemgate/deploy/logq"
	"github.com/idemgate/idemgate/ossresult"
)

// checkLogs: the function logs into the logstore the stack creates and
// indexes, after the index exists; every alert and dashboard chart reads
// indexed keys only, and its SLS name fits.
func checkLogs(cloud, _ Stack) error {
	l := cloud.Logs
	if l == nil {
		return errors.New("no logstore, index or alerts")
	}
	errs := []error{logq.Check(l.Alerts), logq.CheckDashboard(logq.Dashboard())}
	logs, _ := cloud.Function.Logs.(PerFormat).ROS.(tree)
	if logs.get("Project") != l.Project || logs.get("Logstore") != l.Store {
		errs = append(errs, errors.New("the function's logConfig is not the logstore the stack creates and indexes"))
	}
	if !slices.Contains(cloud.Function.DependsOn, indexRes) {
		errs = append(errs, fmt.Errorf("the function does not depend on %s: its first lines would miss the index", indexRes))
	}
	if len(l.Alerts) == 0 {
		errs = append(errs, errors.New("no alerts"))
	}
	storeMax := 40 // the longest name LogStore's pattern admits
	for _, a := range l.Alerts {
		if storeMax+1+len(a.Name) > 64 {
			errs = append(errs, fmt.Errorf("alert %s: <logstore>-%s may exceed 64 characters", a.Name, a.Name))
		}
	}
	if !strings.Contains(l.Store.Pattern, "{1,38}") {
		errs = append(errs, fmt.Errorf("LogStore pattern %q: keep it at most %d characters (alert names)", l.Store.Pattern, storeMax))
	}
	if l.TTLDays < 7 {
		errs = append(errs, fmt.Errorf("logstore TTL %d days: the runbooks look back a week", l.TTLDays))
	}
	return errors.Join(errs...)
}

// expires is what the bucket's rule does to an object written under key:
// OSS matches the rule's prefix and excludes Filter.Not (prefix and tag).
func (r *Results) expires(key string) bool {
	tag := ossresult.KindOf(key)
	keep := strings.HasPrefix(key, r.Prefix) && r.KeepTag == [2]string{ossresult.TagKind, tag}
	return strings.HasPrefix(key, r.Prefix) && !keep
}

// checkResults: the bucket the stack creates is the one the function writes;
// its rule expires inputs and attempt outputs and keeps approved results,
// and no input expires while FC may still deliver its event again.
func checkResults(cloud, _ Stack) error {
	r := cloud.Results
	if r == nil {
		return errors.New("no results bucket")
	}
	var errs []error
	if r.Bucket != envValue(cloud, "OSS_BUCKET") {
		errs = append(errs, errors.New("the bucket with the rule is not OSS_BUCKET, where the function writes"))
	}
	if !slices.Contains(cloud.Function.DependsOn, resultsRes) {
		errs = append(errs, fmt.Errorf("the function does not depend on %s", resultsRes))
	}
	k := strings.Repeat("ab", 32)
	in, _ := ossresult.InputKey(k)
	att, _ := ossresult.AttemptKey(k, 2)
	app, _ := ossresult.ApprovedKey(k)
	for key, want := range map[string]bool{in: true, att: true, app: false} {
		if r.expires(key) != want {
			errs = append(errs, fmt.Errorf("the rule expires %s (kind %q): %v, want %v", key, ossresult.KindOf(key), !want, want))
		}
	}
	days, err := strconv.Atoi(string(r.ExpireDays.Default.(Lit)))
	if err != nil || !r.ExpireDays.Number {
		errs = append(errs, fmt.Errorf("ObjectExpireDays %v: a Number parameter", r.ExpireDays.Default))
	}
	age := time.Duration(cloud.Function.Async.MaxEventAgeS) * time.Second
	for _, d := range []int{days, r.ExpireDays.MinValue} {
		if time.Duration(d)*24*time.Hour <= age {
			errs = append(errs, fmt.Errorf("inputs may expire after %d days, before FC stops redelivering (%v)", d, age))
		}
	}
	return errors.Join(errs...)
}

// Properties of the ROS resource types the stack's logs and results use
// (ROS resource specification; a typo would be rejected only at deploy time).
var rosKnown = map[string]map[string]bool{
	"ALIYUN::SLS::Logstore": setOf("ProjectName", "LogstoreName", "AppendMeta", "AutoSplit", "EnableTracking",
		"MaxSplitShard", "PreserveStorage", "ShardCount", "TTL"),
	"ALIYUN::SLS::Index":  setOf("ProjectName", "LogstoreName", "FullTextIndex", "KeyIndices", "LogReduce"),
	"ALIYUN::SLS::Alert":  setOf("Project", "Detail"),
	"ALIYUN::OSS::Bucket": setOf("BucketName", "AccessControl", "DeletionForce", "LifecycleConfiguration", "Tags", "Policy"),
	"KeyIndices":          setOf("Name", "Type", "JsonKeyIndices", "Delimiter", "IncludeChinese", "Alias", "EnableAnalytics", "CaseSensitive"),
	"JsonKeyIndices":      setOf("Name", "Type", "Alias", "EnableAnalytics"),
	"Detail":              setOf("Type", "Description", "Configuration", "State", "Schedule", "DisplayName", "Name"),
	"Configuration": setOf("Throttling", "Condition", "NotificationList", "NotifyThreshold", "Dashboard", "QueryList",
		"Type", "GroupConfiguration", "NoDataFire", "Threshold", "SeverityConfigurations", "Labels", "AutoAnnotation",
		"PolicyConfiguration", "SendResolved", "NoDataSeverity", "Annotations", "MuteUntil", "JoinConfigurations", "Version"),
	"QueryList": setOf("Query", "LogStore", "Start", "TimeSpanType", "PowerSqlMode", "Store", "DashboardId", "RoleArn",
		"StoreType", "Project", "Region", "End", "ChartTitle"),
	"Schedule":            setOf("DayOfWeek", "Type", "RunImmediately", "Hour", "CronExpression", "Delay", "Interval"),
	"PolicyConfiguration": setOf("AlertPolicyId", "ActionPolicyId", "UseDefault", "RepeatInterval"),
	"Rule":                setOf("ID", "Prefix", "Status", "Expiration", "Filter", "Transition", "AbortMultipartUpload"),
}

// checkROSProperties: every property of the logs and results resources,
// and of their nested maps that the spec describes, is known to ROS.
func checkROSProperties(cloud, _ Stack) error {
	var all tree
	if cloud.Logs != nil {
		all = append(all, logsResources(cloud.Logs)...)
	}
	if cloud.Results != nil {
		all = append(all, entry{key: resultsRes, val: resultsResource(cloud.Results)})
	}
	var errs []error
	for _, res := range all {
		t := res.val.(tree)
		typ := t.get("Type").(string)
		errs = append(errs, knownKeys(res.key, typ, t.get("Properties").(tree)))
	}
	return errors.Join(errs...)
}

// knownKeys checks t's keys against rosKnown[set], then every nested map
// whose key names a set of its own.
func knownKeys(where, set string, t tree) error {
	var errs []error
	for _, e := range t {
		if known, ok := rosKnown[set]; ok && !known[e.key] {
			errs = append(errs, fmt.Errorf("%s: %s has no property %q", where, set, e.key))
		}
		switch v := e.val.(type) {
		case tree:
			errs = append(errs, knownKeys(where, e.key, v))
		case []any:
			for _, item := range v {
				if it, ok := item.(tree); ok {
					errs = append(errs, knownKeys(where, e.key, it))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// The checks above fail on the descriptions they exist to refuse.
func TestObservabilityChecksCatchMutations(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(c *Stack)
		fails  string
	}{
		{"alert reads a key the index lacks", func(c *Stack) {
			c.Logs.Alerts[1].Query.Where = logq.Filter{{Field: "Status", Values: []string{"FAILED_FINAL"}}}
		}, "logs, index and alerts"},
		{"function logs elsewhere", func(c *Stack) { c.Logs.Store = &Input{Param: "OtherStore", Default: Lit("x")} },
			"logs, index and alerts"},
		{"function starts before the index", func(c *Stack) { c.Function.DependsOn = []string{resultsRes} },
			"logs, index and alerts"},
		{"no alerts", func(c *Stack) { c.Logs.Alerts = nil }, "logs, index and alerts"},
		{"rule keeps attempts, expires approved results", func(c *Stack) {
			c.Results.KeepTag = [2]string{ossresult.TagKind, ossresult.KindAttempt}
		}, "results bucket and its lifecycle rule"},
		{"rule on another prefix", func(c *Stack) { c.Results.Prefix = "results/" }, "results bucket and its lifecycle rule"},
		{"inputs expire before FC's last delivery", func(c *Stack) { c.Results.ExpireDays.MinValue = 1 },
			"results bucket and its lifecycle rule"},
		{"rule on a bucket the function does not write", func(c *Stack) { c.Results.Bucket = &Input{Param: "Other"} },
			"results bucket and its lifecycle rule"},
		{"an alert on another indexed key", func(c *Stack) { c.Logs.Alerts[0].Query.Agg = logq.Max; c.Logs.Alerts[0].Query.Field = "attempt" },
			""}, // a valid change: no check may fail
		{"logstore forgets within days", func(c *Stack) { c.Logs.TTLDays = 3 }, "logs, index and alerts"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cloud, local := Idemgate(), Local()
			c.mutate(&cloud)
			failed := runChecks(cloud, local)
			if c.fails == "" {
				if len(failed) > 0 {
					t.Fatalf("a valid change failed checks: %v", failed)
				}
				return
			}
			if failed[c.fails] == nil {
				t.Fatalf("check %q passed on the changed description; failures: %v", c.fails, failed)
			}
			t.Logf("%s: %v", c.fails, failed[c.fails])
		})
	}
	// A property name ROS does not know.
	if err := knownKeys("x", "ALIYUN::SLS::Index", tree{{key: "KeyIndices", val: []any{tree{{key: "Nmae", val: "m"}}}}}); err == nil {
		t.Error("knownKeys accepted a misspelt key index property")
	}
}

// The operators' duplicate-rate query (docs/operations.md, Stats) is
// logq.DuplicateRate, the definition `main stats` shares
// (handler.DuplicateDecisions).
func TestDuplicateRateQueryDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```sql\n"+logq.DuplicateRate.SQL()+"\n```") {
		t.Fatalf("docs/operations.md does not show the duplicate-rate query of deploy/logq; paste it:\n%s", logq.DuplicateRate.SQL())
	}
}

// docs/operations.md has a runbook per alert, headed so that the alert's
// runbook link resolves, with the query the alert runs; and a Log fields
// table with every indexed key and its type.
func TestOperationsRunbooks(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, a := range logq.Alerts() {
		// GitHub's anchor of a heading: lower case, spaces to dashes.
		if anchor := strings.ReplaceAll(strings.ToLower(a.Heading()), " ", "-"); anchor != a.Anchor() {
			t.Errorf("heading %q anchors #%s, the alert links #%s", a.Heading(), anchor, a.Anchor())
		}
		i := strings.Index(doc, "\n### "+a.Heading()+"\n")
		if i < 0 {
			t.Errorf("docs/operations.md has no section %q", "### "+a.Heading())
			continue
		}
		section := doc[i+1:]
		if j := strings.Index(section[4:], "\n## "); j >= 0 {
			section = section[:j+4]
		}
		if j := strings.Index(section[4:], "\n### "); j >= 0 {
			section = section[:j+4]
		}
		for _, want := range []string{"```sql\n" + a.Query.SQL() + "\n```", "`" + a.Condition() + "`", "**What to run.**"} {
			if !strings.Contains(section, want) {
				t.Errorf("runbook %s lacks %q", a.Name, want)
			}
		}
	}
	for _, f := range logq.Fields {
		if row := fmt.Sprintf("| `%s` | %s | %s |", f.Name, f.Type, f.Doc); !strings.Contains(doc, row) {
			t.Errorf("the Log fields table lacks %s", row)
		}
	}
	fieldsDoc := doc[strings.Index(doc, "\n## Log fields\n")+1:]
	for k := range logq.Unindexed {
		if !strings.Contains(fieldsDoc, "`"+k+"`") {
			t.Errorf("the Log fields section does not name the unindexed key %q", k)
		}
	}
	for _, k := range []string{"## Log fields", "## Notify security"} {
		if !strings.Contains(doc, "\n"+k+"\n") {
			t.Errorf("docs/operations.md lacks %q", k)
		}
	}
}

// Every reference in template.yml (Ref, Fn::GetAtt, Fn::Sub, Fn::If,
// DependsOn) names a parameter, resource, condition or pseudo parameter of
// the template, and no name is both a parameter and a resource.
func TestTemplateReferencesResolve(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "template.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	section := func(k string) map[string]any { m, _ := doc[k].(map[string]any); return m }
	params, resources, conds := section("Parameters"), section("Resources"), section("Conditions")
	for name := range params {
		if _, dup := resources[name]; dup {
			t.Errorf("%s is both a parameter and a resource", name)
		}
	}
	known := func(name string) bool {
		_, p := params[name]
		_, r := resources[name]
		return p || r || strings.HasPrefix(name, "ALIYUN::")
	}
	sub := regexp.MustCompile(`\$\{([^}]+)\}`)
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				switch k {
				case "Ref":
					if s, _ := x.(string); !known(s) {
						t.Errorf("%s: Ref %v names nothing", where, x)
					}
				case "Fn::GetAtt":
					if l, _ := x.([]any); len(l) != 2 || resources[fmt.Sprint(l[0])] == nil {
						t.Errorf("%s: Fn::GetAtt %v names no resource", where, x)
					}
				case "Fn::Sub":
					for _, m := range sub.FindAllStringSubmatch(fmt.Sprint(x), -1) {
						if name, _, _ := strings.Cut(m[1], "."); !known(name) {
							t.Errorf("%s: Fn::Sub ${%s} names nothing", where, m[1])
						}
					}
				case "Fn::If":
					if l, _ := x.([]any); len(l) != 3 || conds[fmt.Sprint(l[0])] == nil {
						t.Errorf("%s: Fn::If %v names no condition", where, x)
					}
				case "DependsOn":
					deps, ok := x.([]any)
					if !ok {
						deps = []any{x}
					}
					for _, d := range deps {
						if resources[fmt.Sprint(d)] == nil {
							t.Errorf("%s: DependsOn %v names no resource", where, d)
						}
					}
				}
				walk(where+"."+k, x)
			}
		case []any:
			for i, x := range v {
				walk(fmt.Sprintf("%s[%d]", where, i), x)
			}
		}
	}
	walk("Resources", resources)
	walk("Outputs", doc["Outputs"])
	if len(resources) < 10 {
		t.Fatalf("template.yml has %d resources: the walk saw no template", len(resources))
	}
}

// template.yml declares the dashboard with every chart of logq.Dashboard,
// on the stack's logstore, after its index.
func TestDashboardDeclared(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "template.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var tpl struct {
		Resources map[string]struct {
			Type       string `yaml:"Type"`
			DependsOn  any    `yaml:"DependsOn"`
			Properties struct {
				Charts []struct {
					Title  string `yaml:"title"`
					Search struct {
						Query string `yaml:"query"`
					} `yaml:"search"`
				} `yaml:"Charts"`
			} `yaml:"Properties"`
		} `yaml:"Resources"`
	}
	if err := yaml.Unmarshal(b, &tpl); err != nil {
		t.Fatal(err)
	}
	d, ok := tpl.Resources[dashboardRes]
	if !ok || d.Type != "ALIYUN::SLS::Dashboard" || d.DependsOn != indexRes {
		t.Fatalf("template.yml: %s is %+v", dashboardRes, d)
	}
	want := logq.Dashboard()
	if len(d.Properties.Charts) != len(want) {
		t.Fatalf("%d charts, want %d", len(d.Properties.Charts), len(want))
	}
	for i, c := range d.Properties.Charts {
		if c.Title != want[i].Title || c.Search.Query != want[i].SQL {
			t.Errorf("chart %d is %q: %q", i, c.Title, c.Search.Query)
		}
	}
}
