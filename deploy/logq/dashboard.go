package logq

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
)

// Chart is one chart of the function's SLS dashboard (template.yml's
// ALIYUN::SLS::Dashboard, beside the alerts): a query over the logstore
// and the columns it draws.
type Chart struct {
	Title string
	Type  string // SLS chart type: line or table
	SQL   string
	X     []string // the x axis column (line), or the table's columns
	Y     []string // the columns drawn (line)
}

var (
	// runs are the deliveries that ran the task (the others were answered).
	runs = Filter{taskLines, {"decision", names([]idempotency.Decision{idempotency.DecisionFirst,
		idempotency.DecisionRepeatSame, idempotency.DecisionTakeover})}}
	perMinute = "date_trunc('minute', __time__) AS minute"
)

// Dashboard is the dashboard's charts: the duplicate rate by the same
// formula as the alert and `main stats`, the decisions, the failures and
// the run time, per minute.
func Dashboard() []Chart {
	var decisions []string
	var cols []string
	for _, d := range handler.ClaimDecisions {
		col := strings.ToLower(string(d))
		decisions = append(decisions, fmt.Sprintf("count_if(%s = '%s') AS %s", column("decision"), d, col))
		cols = append(cols, col)
	}
	failed := Filter{{"msg", []string{MsgFailed}}}
	return []Chart{
		{Title: "Duplicate rate (duplicates / deliveries that reached a claim)", Type: "line",
			SQL: DuplicateRate.SQL(), X: []string{"minute"}, Y: []string{"value"}},
		{Title: "Claim decisions per minute", Type: "line",
			SQL: "* | SELECT " + perMinute + ", " + strings.Join(decisions, ", ") + " FROM log WHERE " +
				Deliveries.sql() + " GROUP BY minute ORDER BY minute",
			X: []string{"minute"}, Y: cols},
		{Title: "Failed deliveries per minute", Type: "line",
			SQL: "* | SELECT " + perMinute + ", count_if(" + column("status") + " = 'FAILED_FINAL') AS final, count_if(" +
				column("status") + " = 'FAILED_RETRYABLE') AS retryable FROM log WHERE " + failed.sql() +
				" GROUP BY minute ORDER BY minute",
			X: []string{"minute"}, Y: []string{"final", "retryable"}},
		{Title: "Failures by errorType", Type: "table",
			SQL: "* | SELECT " + column("errorType") + " AS error, count(1) AS deliveries FROM log WHERE " + failed.sql() +
				" GROUP BY error ORDER BY deliveries DESC LIMIT 20",
			X: []string{"error", "deliveries"}},
		{Title: "Run time of the deliveries that ran the task (ms)", Type: "line",
			SQL: "* | SELECT " + perMinute + ", approx_percentile(" + column("duration_ms") + ", 0.5) AS p50, approx_percentile(" +
				column("duration_ms") + ", 0.95) AS p95, max(" + column("duration_ms") + ") AS slowest FROM log WHERE " +
				runs.sql() + " GROUP BY minute ORDER BY minute",
			X: []string{"minute"}, Y: []string{"p50", "p95", "slowest"}},
	}
}

var (
	sqlKey   = regexp.MustCompile(`"message\.([A-Za-z_]+)"`)
	sqlAlias = regexp.MustCompile(`\bAS ([a-z_0-9]+)`)
	numeric  = regexp.MustCompile(`(?:approx_percentile|max|min|avg|sum)\("message\.([A-Za-z_]+)"`)
)

// CheckDashboard reports the charts' mistakes: a key no index covers, a
// number taken of a text key, an axis the query does not name, a title
// twice.
func CheckDashboard(charts []Chart) error {
	typ := fieldTypes()
	var errs []string
	seen := map[string]bool{}
	for _, c := range charts {
		if seen[c.Title] || c.Title == "" || (c.Type != "line" && c.Type != "table") {
			errs = append(errs, fmt.Sprintf("chart %q: a title of its own and type line or table", c.Title))
		}
		seen[c.Title] = true
		for _, m := range sqlKey.FindAllStringSubmatch(c.SQL, -1) {
			if typ[m[1]] == "" {
				errs = append(errs, fmt.Sprintf("chart %q reads %q, which the index does not cover", c.Title, m[1]))
			}
		}
		for _, m := range numeric.FindAllStringSubmatch(c.SQL, -1) {
			if t := typ[m[1]]; t != "long" && t != "double" {
				errs = append(errs, fmt.Sprintf("chart %q computes on %q, indexed as %q", c.Title, m[1], t))
			}
		}
		aliases := map[string]bool{}
		for _, m := range sqlAlias.FindAllStringSubmatch(c.SQL, -1) {
			aliases[m[1]] = true
		}
		for _, col := range append(append([]string{}, c.X...), c.Y...) {
			if !aliases[col] {
				errs = append(errs, fmt.Sprintf("chart %q draws %q, which its query does not name", c.Title, col))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("dashboard: %s", strings.Join(errs, "; "))
	}
	return nil
}
