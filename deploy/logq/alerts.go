package logq

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
)

// Field is one key of the function's log lines that the logstore indexes.
type Field struct {
	Name string
	Type string // SLS JSON key type: text, long or double
	Doc  string
}

// Fields are the indexed keys (template.yml's index on "message"; the "Log
// fields" table of docs/operations.md).
var Fields = []Field{
	{"level", "text", "INFO, WARN or ERROR"},
	{"msg", "text", "what happened: task answered, task failed, claimed, sweep done, fast layer unavailable, redis client (go-redis's own complaint, a dial that failed after its retries, in `error`, with the request's keys when a task's call made it)…"},
	{"request_id", "text", "the task's request id (its data.request_id, else its fingerprint)"},
	{"fc_request_id", "text", "FC's x-fc-request-id of the invocation"},
	{"idempotency_key", "text", "the business key K (64 hex)"},
	{"fingerprint", "text", "SHA-256 of the event's data (JCS)"},
	{"task_type", "text", "the task's type"},
	{"decision", "text", "FIRST, REPEAT_SAME, TAKEOVER, REPEAT_OTHER, REPEAT_DONE, PAYLOAD_MISMATCH or REJECTED"},
	{"status", "text", "RUNNING, SUCCEEDED, FAILED_RETRYABLE, FAILED_FINAL or REJECTED"},
	{"duplicate", "text", "true for every claim decision but FIRST"},
	{"attempt", "long", "attempt number of the task"},
	{"fence", "long", "fencing token of the claim"},
	{"fc_retry_count", "long", "FC's x-fc-retry-count (-1: not sent)"},
	{"duration_ms", "long", "time spent on the task in this invocation"},
	{"errorType", "text", "the failure's code (docs/design.md §10), e.g. attempts_exhausted"},
	{"retryable", "text", "true when FC should deliver the failed task again"},
	{"op", "text", "the fast-layer call that failed (claim, publish, release, forget)"},
	{"scanned", "long", "sweep: candidates found"},
	{"redriven", "long", "sweep: tasks run again"},
	{"finished", "long", "sweep: SUCCEEDED tasks whose publish or notify was completed"},
	{"skipped", "long", "sweep: candidates left for the next run"},
	{"deferred", "long", "sweep: candidates set aside (no input.json yet, or it could not be read)"},
	{"backoff", "long", "sweep: candidates still in a retryable failure's back-off, not run (FC's retry or a later sweep runs them)"},
	{"oldest_age_s", "long", "sweep: age of the oldest candidate since its first claim, in seconds"},
	{"trace_id", "text", "W3C trace id the line's work runs under: the task event's traceparent, else the invocation's, else a new one"},
}

// Unindexed are keys the lines carry that the index leaves to the full-text
// index, with the reason.
var Unindexed = map[string]string{
	"time":                "SLS keeps its own __time__; the line's time stays in the text",
	"error":               "free text (redacted); the full-text index finds its words",
	"body_bytes":          "size of a rejected event body, read with its line",
	"members":             "batch size on a failed batch's line",
	"failed":              "failed members on a failed batch's line",
	"original_request_id": "on a misrouted dead-letter message's line",
	"panic":               "a recovered panic's value, read with its line",
	"point":               "IDEMGATE_FAULT point (drills only)",
	"addr":                "the listening address at start",
	"command":             "the startup line's subcommand (serve, stats, …)",
	"store":               "the startup line's store (no secrets)",
	"fast":                "the startup line's fast layer",
	"results":             "the startup line's result store",
	"model":               "the startup line's model",
	"store_answered":      "the startup line: answered, or why the store did not",
	"fast_answered":       "the startup line: answered (with Redis's version), none, or why it did not",
	"taken_up":            "main sweep's progress line: records taken up so far",
	"salvage":             "on the claimed line: a lease past the attempt budget (see attempts exhausted)",
	"reason":              "why the sweeper set a record aside, read with its line",
	"purged_records":      "the daily purge line's count of task records deleted",
	"purged_steps":        "the daily purge line's count of step records deleted",
	"purged_replays":      "the daily purge line's count of audit rows deleted",
	"purged_stats":        "the daily purge line's count of stats rows deleted",
	"purged_tombstones":   "the daily purge line's count of tombstones deleted (their objects' lifetime over)",
	"more":                "on the purge line: its budget ran out with more due",
	"batches":             "on the purge line: how many batches it ran",
}

// Messages of the lines the alerts read (handler/pipeline.go, handler/ops.go,
// idempotency/engine.go).
const (
	MsgAnswered  = "task answered"
	MsgFailed    = "task failed"
	MsgFastLayer = "fast layer unavailable, going on with the durable store alone"
	MsgSweepDone = "sweep done"
	// MsgFinishFailed is the error-level line of a finish that failed FINAL
	// (handler/finish.go): the result stands, unpublished or unnotified.
	MsgFinishFailed = "finish failed"
	ErrorExhausted  = driver.ExhaustedCode
)

func names(ds []idempotency.Decision) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = string(d)
	}
	return out
}

// taskLines are the one line each task delivery ends with.
var taskLines = In{"msg", []string{MsgAnswered, MsgFailed}}

// Deliveries select the deliveries of a task's key that reached a claim.
var Deliveries = Filter{taskLines, {"decision", names(handler.ClaimDecisions)}}

// DuplicateRate is the share of duplicates among deliveries per minute: the
// README's query, the same definition as `main stats`
// (handler.DuplicateDecisions).
var DuplicateRate = Query{Where: Deliveries, Agg: Share,
	Part: Filter{{"decision", names(handler.DuplicateDecisions())}}, PerMinute: true}

// Alert is one alert rule: its query, evaluated every minute over the last
// Window, fires when a result row's value passes the threshold (and, with
// MinLines, enough lines were seen).
type Alert struct {
	Name      string // names the SLS alert (<logstore>-<Name>) and its runbook section
	Title     string // display name, at most 64 characters
	Doc       string // what it means, for the alert's description
	Query     Query
	Window    time.Duration
	Op        string // ">" or ">="
	Threshold float64
	MinLines  int
	Severity  int // SLS: 2 report, 4 low, 6 medium, 8 high, 10 critical
}

// Condition is the SLS trigger condition on a result row.
func (a Alert) Condition() string {
	c := "value " + a.Op + " " + strconv.FormatFloat(a.Threshold, 'f', -1, 64)
	if a.MinLines > 0 {
		c += " && lines >= " + strconv.Itoa(a.MinLines)
	}
	return c
}

// Fires reports whether any row meets the condition.
func (a Alert) Fires(rows []Row) bool {
	for _, r := range rows {
		over := r.Value > a.Threshold || (a.Op == ">=" && r.Value == a.Threshold)
		if over && r.Lines >= a.MinLines {
			return true
		}
	}
	return false
}

// Anchor is the alert's runbook section in docs/operations.md.
func (a Alert) Anchor() string { return "alert-" + a.Name }

// Heading is the runbook section's title (its anchor is Anchor).
func (a Alert) Heading() string { return "Alert " + a.Name }

// Start is the alert query's relative window start ("-5m").
func (a Alert) Start() string { return fmt.Sprintf("-%dm", a.Window/time.Minute) }

// Alerts are the function's alert rules (template.yml; docs/operations.md
// has the runbook of each).
func Alerts() []Alert {
	owned := names([]idempotency.Decision{idempotency.DecisionFirst, idempotency.DecisionRepeatSame,
		idempotency.DecisionTakeover})
	return []Alert{
		{Name: "duplicate-rate", Title: "idemgate: duplicate rate above 30%", Severity: 6,
			Doc:    "More than 30% of the deliveries in 5 minutes were of keys already claimed (at least 20 deliveries).",
			Query:  Query{Where: DuplicateRate.Where, Agg: Share, Part: DuplicateRate.Part},
			Window: 5 * time.Minute, Op: ">", Threshold: 0.3, MinLines: 20},
		{Name: "failed-final", Title: "idemgate: 5 or more FAILED_FINAL tasks in a minute", Severity: 8,
			Doc: "Runs that recorded a final failure (each ends in the dead-letter queue); their FC retries, " +
				"answered from the record, are not counted again.",
			Query:  Query{Where: Filter{{"msg", []string{MsgFailed}}, {"status", []string{"FAILED_FINAL"}}, {"decision", owned}}, PerMinute: true},
			Window: 5 * time.Minute, Op: ">=", Threshold: 5},
		{Name: "attempts-exhausted", Title: "idemgate: attempts exhausted", Severity: 8,
			Doc:    "A task's lease ran out on its last attempt (the worker died or timed out): it is FAILED_FINAL without a result.",
			Query:  Query{Where: Filter{{"msg", []string{MsgFailed}}, {"errorType", []string{ErrorExhausted}}}},
			Window: 5 * time.Minute, Op: ">=", Threshold: 1},
		{Name: "finish-failed", Title: "idemgate: a finish failed FINAL", Severity: 8,
			Doc: "A SUCCEEDED task's publish or notify failed FINAL (notify_rejected, notify_forbidden, result_conflict, " +
				"objects_expired): its deliveries end in the dead-letter queue (one acknowledged before the failure leaves none: " +
				"the line's key is all replay --key needs) and the record stays until an operator acts.",
			Query:  Query{Where: Filter{{"msg", []string{MsgFinishFailed}}}},
			Window: 5 * time.Minute, Op: ">=", Threshold: 1},
		{Name: "takeovers", Title: "idemgate: 10 or more lease takeovers in a minute", Severity: 6,
			Doc:    "Claims that took over an earlier claim (TAKEOVER, REPEAT_SAME): workers dying, timing out or failing retryably.",
			Query:  Query{Where: Filter{taskLines, {"decision", names([]idempotency.Decision{idempotency.DecisionTakeover, idempotency.DecisionRepeatSame})}}, PerMinute: true},
			Window: 5 * time.Minute, Op: ">=", Threshold: 10},
		{Name: "fast-layer-unavailable", Title: "idemgate: Redis unavailable", Severity: 4,
			Doc:    "Fast-layer calls failed at least 3 times in 5 minutes; the function goes on with MySQL alone.",
			Query:  Query{Where: Filter{{"msg", []string{MsgFastLayer}}}},
			Window: 5 * time.Minute, Op: ">=", Threshold: 3},
		{Name: "sweep-old-work", Title: "idemgate: sweeper finds work older than 15 minutes", Severity: 6,
			Doc:    "The sweeper found a task first claimed more than 15 minutes ago and still not done.",
			Query:  Query{Where: Filter{{"msg", []string{MsgSweepDone}}}, Agg: Max, Field: "oldest_age_s"},
			Window: 5 * time.Minute, Op: ">", Threshold: 900},
	}
}

// fieldTypes maps each indexed key to its SLS type.
func fieldTypes() map[string]string {
	typ := map[string]string{}
	for _, f := range Fields {
		typ[f.Name] = f.Type
	}
	return typ
}

// Check reports the alerts' mistakes: a key no index covers, a maximum over
// a text key, a title too long, an unknown operator or severity.
func Check(alerts []Alert) error {
	typ := fieldTypes()
	var errs []string
	seen := map[string]bool{}
	for _, a := range alerts {
		if seen[a.Name] || a.Name == "" {
			errs = append(errs, fmt.Sprintf("alert name %q is empty or not unique", a.Name))
		}
		seen[a.Name] = true
		for _, f := range a.Query.Fields() {
			if typ[f] == "" {
				errs = append(errs, fmt.Sprintf("%s reads %q, which the index does not cover", a.Name, f))
			}
		}
		if a.Query.Agg == Max && typ[a.Query.Field] == "text" {
			errs = append(errs, fmt.Sprintf("%s takes the maximum of text key %q", a.Name, a.Query.Field))
		}
		if len(a.Title) > 64 || (a.Op != ">" && a.Op != ">=") || a.Severity%2 != 0 || a.Severity < 2 || a.Severity > 10 ||
			a.Window < time.Minute || a.Window%time.Minute != 0 {
			errs = append(errs, fmt.Sprintf("%s: title ≤ 64 characters, op > or >=, severity 2..10 even, window whole minutes", a.Name))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("alerts: %s", strings.Join(errs, "; "))
	}
	return nil
}
