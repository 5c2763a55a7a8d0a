// Package httpapi is the template's HTTP entry (docs/api.md): what FC's HTTP
// trigger sends to the custom runtime outside its control paths.
//
//   - POST /tasks: the JSON body is a task's data object, as an event
//     carries it; Idempotency-Key (required, an RFC 8941 sf-string) is the
//     task's idempotency_key. It runs through the same pipeline as an event
//     and answers the outcome: 200 SUCCEEDED, FINAL failures as 4xx,
//     retryable ones as 503, in flight as 409, each with Retry-After where
//     a retry may help; every refusal application/problem+json.
//   - GET /tasks/{idempotency_key}: the task's state, by K (64 hex, the
//     outcome's idempotency_key) or, with ?tenant_id=, by the client's key
//     (not under KEY_JMESPATH, where K comes from the task's data).
//
// With X-Fc-Invocation-Type: Async, FC has answered the client 202 already
// and retries what this answers as failed (x-fc-status: 404), as it does an
// event's: so a retryable failure is retried, a FINAL one reaches the
// failure destination.
package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemhttp"
)

// MaxBody bounds a POST /tasks body: the largest input a task takes, and room
// for the other fields. (FC's own bound is 128 KB for an async invocation.)
const MaxBody = handler.MaxInputBytes + 64<<10

// Problem types of the task routes besides idemhttp's.
const (
	TypeTaskFailed       = idemhttp.ProblemBase + "task-failed"        // 422: the task failed FINAL
	TypeMethodNotAllowed = idemhttp.ProblemBase + "method-not-allowed" // 405, with Allow
	// 400: GET by the client's key where KEY_JMESPATH derives K instead
	TypeKeyLookupUnavailable = idemhttp.ProblemBase + "key-lookup-unavailable"
)

// API serves the task routes.
type API struct {
	Pipeline   *handler.Pipeline
	Log        *slog.Logger
	RetryAfter time.Duration // of 409 and 503 (default 1 s)
}

var keyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Serve answers one request that is not an FC control path.
func (a *API) Serve(ctx context.Context, w http.ResponseWriter, r *http.Request, meta handler.Meta) {
	if strings.EqualFold(r.Header.Get("x-fc-invocation-type"), "async") {
		w = asyncWriter{w}
	}
	// /tasks/{idempotency_key}: one segment of the path as sent, unescaped
	// once, so that a key holding "/" (sent as %2F) is found and a path of
	// more segments is no task's.
	seg, isTask := strings.CutPrefix(r.URL.EscapedPath(), "/tasks/")
	id, err := url.PathUnescape(seg)
	one := isTask && seg != "" && !strings.Contains(seg, "/") && err == nil
	switch {
	case r.URL.Path == "/tasks" && r.Method == http.MethodPost:
		a.submit(ctx, w, r, meta)
	case one && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		a.state(ctx, w, r, id)
	case r.URL.Path == "/tasks":
		methodNotAllowed(w, "POST")
	case one:
		methodNotAllowed(w, "GET, HEAD")
	default:
		idemhttp.WriteProblem(w, idemhttp.Problem{Type: idemhttp.TypeNotFound, Title: "Not found",
			Status: http.StatusNotFound, Detail: "no such route: POST /tasks, GET /tasks/{idempotency_key}"})
	}
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	idemhttp.WriteProblem(w, idemhttp.Problem{Type: TypeMethodNotAllowed,
		Title: "Method not allowed", Status: http.StatusMethodNotAllowed, Detail: "POST /tasks, GET /tasks/{idempotency_key}"})
}

func (a *API) retryAfter() time.Duration {
	if a.RetryAfter > 0 {
		return a.RetryAfter
	}
	return time.Second
}

func (a *API) submit(ctx context.Context, w http.ResponseWriter, r *http.Request, meta handler.Meta) {
	key, present, err := idemhttp.ParseKey(r.Header.Values(idemhttp.HeaderKey))
	if err != nil || !present {
		idemhttp.WriteProblem(w, idemhttp.KeyProblem(err))
		return
	}
	body, p := idemhttp.ReadBody(r, MaxBody, true)
	if p != nil {
		idemhttp.WriteProblem(w, *p)
		return
	}
	// A client that hangs up must not cancel its own task midway: its retry
	// would take the lease over and run the model again. FC's deadline holds.
	run, cancel := context.WithoutCancel(ctx), context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		run, cancel = context.WithDeadline(run, dl)
	}
	defer cancel()
	o := a.Pipeline.Submit(run, body, key, meta)
	if o.ErrorType == "" && o.Status != string(driver.StatusRunning) {
		writeOutcome(w, o)
		return
	}
	idemhttp.WriteProblem(w, a.problemOf(ctx, o))
}

func writeOutcome(w http.ResponseWriter, o handler.Outcome) {
	if replayed(o) {
		w.Header().Set(idemhttp.HeaderReplayed, "true")
	}
	writeJSON(w, http.StatusOK, o)
}

// replayed: the answer was taken from the key's record. A takeover or the
// same request's own later try ran the task again (docs/api.md).
func replayed(o handler.Outcome) bool {
	d := driver.Decision(o.Decision)
	return o.Duplicate && d != driver.DecisionTakeover && d != driver.DecisionRepeatSame
}

// problemOf maps a task's failed or in-flight outcome to its answer.
func (a *API) problemOf(ctx context.Context, o handler.Outcome) idemhttp.Problem {
	retryable := o.Retryable != nil && *o.Retryable
	switch {
	case o.ErrorType == "":
		return idemhttp.InFlightProblem(a.retryAfter())
	case o.ErrorType == "payload_mismatch":
		return idemhttp.ProblemKeyReused
	case retryable:
		p := idemhttp.UnavailableProblem("the task could not run now ("+o.ErrorType+"); retry it with the same key", a.retryAfter())
		p.Code = o.ErrorType
		if rec, err := a.Pipeline.Engine.Get(ctx, o.IdempotencyKey); err == nil && o.IdempotencyKey != "" {
			p.RetryAfter = max(time.Until(rec.RetryAfter), p.RetryAfter) // the back-off of its failure (docs/design.md §6)
		}
		return p
	case o.Decision == handler.DecisionRejected: // refused before any claim: the request itself is wrong
		p := idemhttp.MalformedBodyProblem(o.ErrorMessage)
		p.Code = o.ErrorType
		return p
	}
	return idemhttp.Problem{Type: TypeTaskFailed, Title: "The task failed for good", Status: http.StatusUnprocessableEntity,
		Code: o.ErrorType, Detail: o.ErrorMessage, Replayed: replayed(o)}
}

func (a *API) state(ctx context.Context, w http.ResponseWriter, r *http.Request, id string) {
	tenant := r.URL.Query().Get("tenant_id")
	if tenant == "" && !keyPattern.MatchString(id) {
		idemhttp.WriteProblem(w, idemhttp.Problem{Type: idemhttp.TypeKeyMalformed, Title: "Not a task key",
			Status: http.StatusBadRequest,
			Detail: "GET /tasks/{idempotency_key} takes K (64 lowercase hex, the outcome's idempotency_key), " +
				"or your Idempotency-Key with ?tenant_id="})
		return
	}
	st, err := a.Pipeline.Task(ctx, id, tenant)
	switch {
	case errors.Is(err, handler.ErrUnknownKey):
		detail := "no task has this key (or it is so old that even its tombstone has gone)"
		if tenant != "" && a.Pipeline.KeyFallback { // such a task's K is not derived from the key (docs/design.md §4)
			detail += "; under KEY_FALLBACK=fingerprint a task sent without tenant_id is keyed by its data's " +
				"fingerprint, not by its Idempotency-Key: look it up by K, the idempotency_key POST answered"
		}
		idemhttp.WriteProblem(w, idemhttp.Problem{Type: idemhttp.TypeNotFound, Title: "Unknown task",
			Status: http.StatusNotFound, Detail: detail})
	case errors.Is(err, handler.ErrKeyedByExpression):
		idemhttp.WriteProblem(w, idemhttp.Problem{Type: TypeKeyLookupUnavailable,
			Title: "Tasks are not looked up by Idempotency-Key here", Status: http.StatusBadRequest,
			Detail: "this deployment derives a task's key from its data (KEY_JMESPATH), not from tenant_id and Idempotency-Key: " +
				"GET /tasks/{K} with the idempotency_key POST answered"})
	case isFinal(err): // a key or tenant no task can have: asking again cannot help
		idemhttp.WriteProblem(w, idemhttp.Problem{Type: idemhttp.TypeKeyMalformed, Title: "Not a task key",
			Status: http.StatusBadRequest, Detail: "the key and tenant_id must be valid UTF-8"})
	case err != nil:
		a.Log.WarnContext(ctx, "task state unavailable", "idempotency_key", id, "error", err.Error())
		idemhttp.WriteProblem(w, idemhttp.UnavailableProblem("the task's record could not be read", a.retryAfter()))
	default:
		writeJSON(w, http.StatusOK, st)
	}
}

// isFinal: err is refused for good (idempotency.ClassFinal), whatever the store.
func isFinal(err error) bool {
	class, _ := idempotency.Classify(err)
	return class == idempotency.ClassFinal
}

// asyncWriter marks every failure so that FC's async invocation retries it
// (or, past its retries, sends it to the failure destination), as it does a
// failed event (docs/design.md §3).
type asyncWriter struct{ http.ResponseWriter }

func (w asyncWriter) WriteHeader(status int) {
	if status >= 300 {
		w.Header().Set("x-fc-status", "404")
	}
	w.ResponseWriter.WriteHeader(status)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // the answer types always encode
		status, body = http.StatusInternalServerError, []byte(`{"errorType":"internal"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
