package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/internal/sleep"
)

// watcher polls the approved objects during the run: create-once means an
// approved/result.md, once seen, never changes (the final look alone could
// not tell).
type watcher struct {
	dir     string // <results>/tasks
	mu      sync.Mutex
	first   map[string]string // K → sha256 of the first content seen
	changed map[string]string // K → what changed
}

func (w *watcher) run(ctx context.Context, every time.Duration) {
	for sleep.For(ctx, every) {
		w.scan()
	}
}

func (w *watcher) scan() {
	entries, _ := os.ReadDir(w.dir)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(w.dir, e.Name(), "approved", "result.md"))
		if err != nil {
			continue
		}
		sum := sha256.Sum256(b)
		h := hex.EncodeToString(sum[:])
		w.mu.Lock()
		switch prev, seen := w.first[e.Name()]; {
		case !seen:
			w.first[e.Name()] = h
		case prev != h && w.changed[e.Name()] == "":
			w.changed[e.Name()] = fmt.Sprintf("approved/result.md changed from sha256 %.12s… to %.12s… (now %q)", prev, h, trunc(string(b), 120))
		}
		w.mu.Unlock()
	}
}

func trunc(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

type checkInput struct {
	plans      []*keyPlan
	tally      *tally
	recs       map[string]record
	calls      map[string]int
	swept      map[string]sweepOutcome
	watch      *watcher
	resultsDir string
	crashes    []string
}

// check applies the invariants per key and fills the report's final
// figures, dead keys and violations.
func check(rep *Report, in checkInput) {
	rep.FinalCodes = map[string]int{}
	in.tally.mu.Lock()
	defer in.tally.mu.Unlock()
	in.watch.mu.Lock()
	defer in.watch.mu.Unlock()
	planned := map[string]bool{}
	for _, p := range in.plans {
		planned[p.key] = true
		checkKey(rep, in, p)
	}
	for key, r := range in.recs {
		if !planned[key] {
			rep.Violations = append(rep.Violations, fmt.Sprintf("a record for a key the run never sent: %s %s attempt %d", key, r.Status, r.Attempt))
		}
	}
	for _, c := range in.crashes {
		rep.Violations = append(rep.Violations, "instance crash: "+c)
	}
}

// checkKey applies the invariants to one key (the caller holds the locks).
func checkKey(rep *Report, in checkInput, p *keyPlan) {
	k := in.tally.keys[p.idx]
	r, has := in.recs[p.key]
	calls := in.calls[p.key]
	approved, aerr := os.ReadFile(filepath.Join(in.resultsDir, "tasks", p.key, "approved", "result.md"))
	var v []string
	if has {
		v = checkRecord(rep, in.resultsDir, p.key, k, r, calls, approved, aerr)
	} else {
		rep.NoRecord++
		// Without a record the task never ran; that is fine while one of its
		// deliveries is in the dead-letter queue (replayable).
		if k.ok > 0 && k.dead == 0 {
			v = append(v, fmt.Sprintf("(1) %d deliveries were answered, none dead-lettered, and there is no record: the task is lost", k.ok))
		}
		if calls > 0 {
			v = append(v, fmt.Sprintf("(3) %d model calls without a record (0 attempts)", calls))
		}
		if aerr == nil {
			v = append(v, "(2) approved/result.md exists without a record")
		}
	}
	if c := in.watch.changed[p.key]; c != "" {
		v = append(v, "(4) "+c)
	}
	for _, w := range k.wrongKey {
		v = append(v, "(4) "+w)
	}
	if k.ok == 0 && k.dead > 0 && k.abandoned == 0 {
		dk := DeadKey{Key: p.key, Status: "NO_RECORD"}
		if has {
			dk.Status, dk.Attempt, dk.LastErrorCode = r.Status, r.Attempt, r.LastErrorCode
			s, ok := in.swept[p.key]
			dk.BySweeper = ok && r.Status == "SUCCEEDED" && s.Status == "SUCCEEDED"
		}
		rep.DeadKeys = append(rep.DeadKeys, dk)
	}
	switch {
	case len(v) > 0:
		rep.Violations = append(rep.Violations, describe(p, k, r, has, calls, in.resultsDir, v))
	case !has || r.Status != "SUCCEEDED":
		rep.Unsuccessful = append(rep.Unsuccessful, describe(p, k, r, has, calls, in.resultsDir, []string{"not succeeded"}))
	}
}

// checkRecord applies invariants 1 to 4 to a key that has a record and
// counts its final state.
func checkRecord(rep *Report, resultsDir, key string, k keyTally, r record, calls int, approved []byte, aerr error) []string {
	var v []string
	bad := func(format string, a ...any) { v = append(v, fmt.Sprintf(format, a...)) }
	rep.Attempts += r.Attempt
	switch r.Status {
	case "SUCCEEDED":
		rep.Succeeded++
		v = append(v, checkApproved(resultsDir, key, r, approved, aerr)...)
	case "FAILED_FINAL":
		rep.FailedFinal++
		rep.FinalCodes[r.LastErrorCode]++
	default:
		if carriedByDeadLetter(resultsDir, key, k) {
			rep.DeadCarried++
			break
		}
		bad("(1) left %s (attempt %d, fence %d, owner %s, lease until %v)", r.Status, r.Attempt, r.Fence, r.LeaseOwner, r.LeaseUntil.Time)
	}
	if r.Status != "SUCCEEDED" && aerr == nil {
		bad("(2) approved/result.md exists for a %s key: %q", r.Status, trunc(string(approved), 120))
	}
	if calls > r.Attempt {
		bad("(3) %d model calls > %d recorded attempts", calls, r.Attempt)
	}
	for _, ref := range sortedKeys(k.succeededRefs) {
		if r.Status != "SUCCEEDED" || ref != r.ResultRef {
			bad("(4) a SUCCEEDED answer named %s, the record is %s %s", refTail(ref), r.Status, refTail(r.ResultRef))
		}
	}
	return v
}

var attemptRef = regexp.MustCompile(`^tasks/([0-9a-f]{64})/attempt-([0-9]{3,})/output\.json$`)

// carriedByDeadLetter reports a key whose unfinished record only its dead
// letters carry: no delivery was answered 200, one ended in the failure
// destination, and the claim's holder died before saving input.json, so
// the sweeper sets the record aside for FC's retries and then records it
// FAILED_FINAL input_missing (docs/operations.md, "When things fail"): the
// dead letter is what an operator replays. Nothing acknowledged is lost.
func carriedByDeadLetter(resultsDir, key string, k keyTally) bool {
	if k.ok > 0 || k.dead == 0 {
		return false
	}
	_, err := os.Stat(filepath.Join(resultsDir, "tasks", key, "input.json"))
	return errors.Is(err, fs.ErrNotExist)
}

// checkApproved is invariant 2 for a SUCCEEDED key.
func checkApproved(resultsDir, key string, r record, approved []byte, aerr error) []string {
	var v []string
	bad := func(format string, a ...any) { v = append(v, fmt.Sprintf(format, a...)) }
	if aerr != nil {
		bad("(2) SUCCEEDED without approved/result.md (%v)", shortErr(aerr))
		return v
	}
	rel, err := filepath.Rel(resultsDir, filepath.FromSlash(strings.TrimPrefix(r.ResultRef, "file://")))
	m := attemptRef.FindStringSubmatch(filepath.ToSlash(rel))
	if !strings.HasPrefix(r.ResultRef, "file://") || err != nil || m == nil || m[1] != key {
		bad("(2) result_ref %q is not an attempt output of this key", r.ResultRef)
		return v
	}
	if n, _ := strconv.Atoi(m[2]); n < 1 || n > r.Attempt {
		bad("(2) result_ref names attempt %d, the record has %d attempts", n, r.Attempt)
	}
	b, err := os.ReadFile(filepath.Join(resultsDir, rel))
	if err != nil {
		bad("(2) result_ref %s cannot be read: %v", refTail(r.ResultRef), shortErr(err))
		return v
	}
	var out struct {
		Key  string `json:"idempotency_key"`
		Text string `json:"text"`
	}
	switch err := json.Unmarshal(b, &out); {
	case err != nil:
		bad("(2) %s is not JSON: %v", refTail(r.ResultRef), err)
	case out.Key != key:
		bad("(2) %s names key %s", refTail(r.ResultRef), out.Key)
	case out.Text != string(approved):
		bad("(2) approved/result.md %q differs from the text of %s %q", trunc(string(approved), 100), refTail(r.ResultRef), trunc(out.Text, 100))
	}
	// Exactly one approved object: nothing else in approved/ but its
	// metadata (and hidden temp files of a writer that was killed).
	dir := filepath.Join(resultsDir, "tasks", key, "approved")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if n := e.Name(); n != "result.md" && n != "result.md.meta.json" && !strings.HasPrefix(n, ".") {
			bad("(2) unexpected object approved/%s", n)
		}
	}
	var meta struct {
		SHA256 string `json:"sha256"`
	}
	if mb, err := os.ReadFile(filepath.Join(dir, "result.md.meta.json")); err == nil && json.Unmarshal(mb, &meta) == nil {
		sum := sha256.Sum256(approved)
		if meta.SHA256 != hex.EncodeToString(sum[:]) {
			bad("(2) approved/result.md does not match the sha256 its create-once claim recorded")
		}
	}
	return v
}

// describe reports a violating key precisely: the record, the objects, the
// model calls and every try of its deliveries.
func describe(p *keyPlan, k keyTally, r record, has bool, calls int, resultsDir string, v []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key %s (#%d%s): %s\n", p.key, p.idx, map[bool]string{true: ", explicit idempotency_key"}[p.explicit], strings.Join(v, "; "))
	if has {
		fmt.Fprintf(&b, "    record: %s attempt=%d fence=%d owner=%s result_ref=%s last_error=%s %s\n", r.Status, r.Attempt, r.Fence,
			r.LeaseOwner, refTail(r.ResultRef), r.LastErrorCode, trunc(r.LastError, 160))
	} else {
		b.WriteString("    record: none\n")
	}
	fmt.Fprintf(&b, "    model calls: %d\n    objects:", calls)
	root := filepath.Join(resultsDir, "tasks", p.key)
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".meta.json") {
			rel, _ := filepath.Rel(root, path)
			b.WriteString(" " + rel)
		}
		return nil
	})
	b.WriteString("\n    deliveries:\n")
	for _, line := range k.trace {
		b.WriteString("      " + line + "\n")
	}
	return strings.TrimRight(b.String(), "\n")
}

// Print writes the summary table; the timeline too when verbose or when
// something was violated.
func (r Report) Print(w io.Writer, verbose bool) {
	fmt.Fprintf(w, "chaos run: seed %d, %d instances, stream %s\n", r.Seed, r.Instances, r.StreamTime.Round(100*time.Millisecond))
	r.printCounts(w)
	if len(r.DeadKeys) > 0 {
		fmt.Fprintln(w, "dead-lettered keys (every delivery ended in the failure destination):")
		for _, d := range r.DeadKeys {
			how := d.Status
			switch {
			case d.BySweeper:
				how += ", completed by the sweeper"
			case d.Status == "FAILED_FINAL":
				how += " (" + d.LastErrorCode + "): replay it from the dead-letter queue"
			case d.Status == "SUCCEEDED":
				how += ", completed by another delivery's run"
			case d.Status != "NO_RECORD":
				how += ", its holder died before saving input.json (the sweeper sets it aside): replay it from the dead-letter queue"
			}
			fmt.Fprintf(w, "  %.16s… attempt %d: %s\n", d.Key, d.Attempt, how)
		}
	}
	printList(w, "VIOLATIONS:", r.Violations, true)
	printList(w, "keys that did not succeed:", r.Unsuccessful, verbose)
	printList(w, "chaos timeline:", r.Timeline, verbose || len(r.Violations) > 0)
	if r.WorkDir != "" {
		fmt.Fprintf(w, "work directory kept: %s (state/, logs/)\n", r.WorkDir)
	}
	if r.Database != "" {
		fmt.Fprintf(w, "database kept: %s\n", r.Database)
	}
}

// printCounts writes the table of counts, one row a figure.
func (r Report) printCounts(w io.Writer) {
	row := func(name string, format string, a ...any) {
		fmt.Fprintf(w, "  %-30s %s\n", name, fmt.Sprintf(format, a...))
	}
	row("keys", "%d", r.Keys)
	row("deliveries", "%d (%s; %d in concurrent bursts)", r.Deliveries, counts(r.Kinds), r.Bursts)
	row("invocations", "%d (FC retries %d)", r.Tries, r.FCRetries)
	row("answered 200", "%d (duplicates answered %d, in progress %d)", r.Answered, r.Duplicates, r.InProgress)
	row("failed invocations", "%s", orNone(counts(r.Failures)))
	row("executions", "%d (answered invocations that claimed and ran a key)", r.Executions)
	row("model calls", "%d (answered 429/503: %d)", r.ModelCalls, r.ModelErrors)
	row("attempts (records)", "%d", r.Attempts)
	row("kills / pauses", "%d / %d", r.Kills, r.Pauses)
	if r.NodeKills > 0 {
		row("database nodes killed", "%d", r.NodeKills)
	}
	row("fault starts / fault deaths", "%d / %d (IDEMGATE_FAULT=after_output)", r.FaultStarts, r.FaultDeaths)
	row("restarts", "%d", r.Restarts)
	row("dead letters", "%d deliveries (retries spent %d, FINAL %d); %d keys with no delivery answered", r.DeadLetters,
		r.DeadExhausted, r.DeadFinal, len(r.DeadKeys))
	row("unsent / abandoned", "%d not started by the duration cap / %d cut by the drain limit", r.Unsent, r.Abandoned)
	row("left before the sweep", "RUNNING/RECEIVED %d, FAILED_RETRYABLE %d", r.RunningBeforeSweep, r.RetryableBeforeSweep)
	row("sweeps", "%d (redriven %d, finished %d)", r.Sweeps, r.SweepRedriven, r.SweepFinished)
	final := fmt.Sprintf("SUCCEEDED %d, FAILED_FINAL %d", r.Succeeded, r.FailedFinal)
	if len(r.FinalCodes) > 0 {
		final += " (" + counts(r.FinalCodes) + ")"
	}
	if r.NoRecord > 0 {
		final += fmt.Sprintf(", no record %d", r.NoRecord)
	}
	if r.DeadCarried > 0 {
		final += fmt.Sprintf(", unfinished without input.json, carried by a dead letter %d", r.DeadCarried)
	}
	row("final state", "%s", final)
	row("violations", "%d", len(r.Violations))
}

// counts lists a map of counts as "name n, …" in name order.
func counts(m map[string]int) string {
	var out []string
	for _, k := range sortedKeys(m) {
		out = append(out, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(out, ", ")
}

// printList writes a titled list when show and it is not empty.
func printList(w io.Writer, title string, lines []string, show bool) {
	if !show || len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, title)
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
