// Package logq describes, once, the questions asked of the function's JSON
// log lines: the duplicate rate and the alerts of docs/operations.md. Each
// Query renders the SLS SQL that template.yml's alerts and the README run
// (SQL) and evaluates the same aggregation over parsed lines in Go (Eval),
// so that the tests can run every alert against lines the real binary wrote
// and a renamed field fails a test instead of silencing an alert.
//
// FC stores each line the function prints in the logstore's "message" field;
// template.yml indexes that field as JSON with the keys of Fields, which SQL
// reads as "message.<key>".
package logq

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Line is one log line, as encoding/json decodes it.
type Line map[string]any

// Text is the line's value of field as SLS indexes it (text): strings as
// they are, numbers in their shortest form, booleans as true/false; "" when
// absent.
func (l Line) Text(field string) string {
	switch v := l[field].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(v)
	}
	return ""
}

// Number is the line's numeric value of field (false when absent or not a number).
func (l Line) Number(field string) (float64, bool) {
	v, ok := l[field].(float64)
	return v, ok
}

// In holds when the field's value is one of Values.
type In struct {
	Field  string
	Values []string
}

// Filter holds when every In holds.
type Filter []In

func (f Filter) match(l Line) bool {
	for _, in := range f {
		found := false
		for _, v := range in.Values {
			found = found || l.Text(in.Field) == v
		}
		if !found {
			return false
		}
	}
	return true
}

// fields lists the keys f reads.
func (f Filter) fields() []string {
	var out []string
	for _, in := range f {
		out = append(out, in.Field)
	}
	return out
}

func (f Filter) sql() string {
	var parts []string
	for _, in := range f {
		quoted := make([]string, len(in.Values))
		for i, v := range in.Values {
			quoted[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		}
		if len(quoted) == 1 {
			parts = append(parts, column(in.Field)+" = "+quoted[0])
		} else {
			parts = append(parts, column(in.Field)+" IN ("+strings.Join(quoted, ", ")+")")
		}
	}
	return strings.Join(parts, " AND ")
}

// column is how SLS SQL names a key of the JSON-indexed message field.
func column(field string) string { return `"message.` + field + `"` }

// Agg is what a Query computes over the lines its Where selects.
type Agg int

const (
	// Count is the number of lines.
	Count Agg = iota
	// Max is the largest value of Query.Field.
	Max
	// Share is the fraction of the lines that Query.Part also selects.
	Share
)

// Query selects lines and aggregates them, over the whole window or per
// minute. Its result rows have the columns value and lines (and minute).
type Query struct {
	Where     Filter
	Agg       Agg
	Field     string // Max: a numeric key (indexed as long or double)
	Part      Filter // Share: the numerator's extra conditions
	PerMinute bool
}

// Row is one result row.
type Row struct {
	Minute time.Time // zero unless PerMinute
	Value  float64
	Lines  int
}

// SQL is the query as SLS runs it: a search for every line, then the
// analytic statement.
func (q Query) SQL() string {
	var sel []string
	if q.PerMinute {
		sel = append(sel, "date_trunc('minute', __time__) AS minute")
	}
	switch q.Agg {
	case Count:
		sel = append(sel, "count(1) AS value")
	case Max:
		sel = append(sel, "max("+column(q.Field)+") AS value")
	case Share:
		sel = append(sel, "round(count_if("+q.Part.sql()+") * 1.0 / count(1), 4) AS value")
	}
	sel = append(sel, "count(1) AS lines")
	s := "* | SELECT " + strings.Join(sel, ", ") + " FROM log WHERE " + q.Where.sql()
	if q.PerMinute {
		s += " GROUP BY minute ORDER BY minute"
	}
	return s
}

// Eval computes the query over lines as SQL does: one row without
// PerMinute (value 0 when no line matches), else one row per minute that has
// lines, oldest first. A line's minute is its "time" field.
func (q Query) Eval(lines []Line) ([]Row, error) {
	type acc struct {
		n, part int
		max     float64
	}
	by := map[time.Time]*acc{}
	var order []time.Time
	for _, l := range lines {
		if !q.Where.match(l) {
			continue
		}
		var m time.Time
		if q.PerMinute {
			t, err := time.Parse(time.RFC3339Nano, l.Text("time"))
			if err != nil {
				return nil, fmt.Errorf("line without a valid time: %v", l)
			}
			m = t.UTC().Truncate(time.Minute)
		}
		a := by[m]
		if a == nil {
			a = &acc{}
			by[m] = a
			order = append(order, m)
		}
		a.n++
		if q.Agg == Share && q.Part.match(l) {
			a.part++
		}
		if v, ok := l.Number(q.Field); q.Agg == Max && ok && (a.n == 1 || v > a.max) {
			a.max = v
		}
	}
	if !q.PerMinute && len(order) == 0 {
		return []Row{{}}, nil
	}
	rows := make([]Row, 0, len(order))
	for _, m := range order {
		a := by[m]
		r := Row{Minute: m, Lines: a.n, Value: float64(a.n)}
		switch q.Agg {
		case Max:
			r.Value = a.max
		case Share:
			r.Value = float64(a.part) / float64(a.n)
		}
		rows = append(rows, r)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Minute.Before(rows[j].Minute) })
	return rows, nil
}

// Fields lists every key the query reads.
func (q Query) Fields() []string {
	out := append(q.Where.fields(), q.Part.fields()...)
	if q.Field != "" {
		out = append(out, q.Field)
	}
	return out
}
