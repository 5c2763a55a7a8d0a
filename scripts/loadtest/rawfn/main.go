// Command rawfn is the first delivery's floor (internal/dev/rawpipe) as a
// function of its own: a custom-runtime server that the load test spawns and
// invokes exactly as it does the function's instances (POST /invoke with the
// same event and FC headers, over the same client) and that does, per event,
// the raw pipeline and nothing else — no idempotency, no Redis, no log line —
// then answers the outcome a first delivery answers. Its clients are built
// from the function's configuration as the function builds them
// (internal/config; mysqlstore.Open's driver settings and pool, llm.New,
// ossresult's V4-signing bucket, notify.New), so that the instances' CPU
// per task over its CPU per task is what the function adds, with both paying
// an HTTP server, a process's wake-ups and its GC.
//
// The task's key is the SHA-256 of the event's id (one key per business
// action, as the load test sends them); notify.url in the event's data asks
// for the notification. IDEMGATE_RAWFN_SKIP=<step> (insert, put, model,
// update, notify) leaves a step out: only for the test that proves the load
// test catches a floor doing less than a task.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/idemgate/idemgate/handler/customruntime"
	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/config"
	"github.com/idemgate/idemgate/internal/dev/rawpipe"
	"github.com/idemgate/idemgate/internal/gctune"
	"github.com/idemgate/idemgate/ossresult"
)

func main() {
	gctune.Tune(os.Getenv) // the function's GC (serve's), so that the floor is not charged more collections
	p, port, err := open(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rawfn:", err)
		os.Exit(2)
	}
	// As the function inside FC: every interface of its network namespace.
	srv := &http.Server{Addr: net.JoinHostPort("0.0.0.0", strconv.Itoa(port)), Handler: &server{p: p},
		ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintln(os.Stderr, "rawfn:", srv.ListenAndServe())
	os.Exit(1)
}

// open builds the pipeline's clients from the function's environment.
func open(getenv func(string) string) (*rawpipe.Pipeline, int, error) {
	cfg, err := config.Load(getenv)
	if err != nil {
		return nil, 0, err
	}
	skip := rawpipe.Step(getenv("IDEMGATE_RAWFN_SKIP"))
	if skip != "" && !slices.Contains([]rawpipe.Step{rawpipe.StepInsert, rawpipe.StepPut, rawpipe.StepModel,
		rawpipe.StepUpdate, rawpipe.StepNotify}, skip) {
		return nil, 0, fmt.Errorf("IDEMGATE_RAWFN_SKIP=%q: not a step", skip)
	}
	store, err := mysqlstore.Open(cfg.MySQLDSN, mysqlstore.Options{})
	if err != nil {
		return nil, 0, err
	}
	oss, err := ossresult.NewOSS(ossresult.OSSConfig{Endpoint: cfg.OSSEndpoint, Bucket: cfg.OSSBucket, Region: cfg.OSSRegion})
	if err != nil {
		return nil, 0, err
	}
	bucket, err := oss.With(ossresult.Credentials{AccessKeyID: cfg.AccessKeyID, AccessKeySecret: cfg.AccessKeySecret,
		SecurityToken: cfg.SecurityToken})
	if err != nil {
		return nil, 0, err
	}
	model, err := llm.New(llm.Config{BaseURL: cfg.LLMBaseURL, APIKey: cfg.LLMAPIKey, Model: cfg.LLMModel, Timeout: cfg.LLMTimeout})
	if err != nil {
		return nil, 0, err
	}
	n := notify.New(notify.Options{Timeout: 10 * time.Second, Allow: cfg.NotifyAllowedHosts, SigningSecret: cfg.NotifySigningSecret})
	return &rawpipe.Pipeline{DB: store.DB(), Bucket: bucket, Model: model, Notify: n, Skip: skip}, cfg.ListenPort, nil
}

type server struct{ p *rawpipe.Pipeline }

// event is what the floor reads of an EventBridge CloudEvent.
type event struct {
	ID   string `json:"id"`
	Data struct {
		Input struct {
			Content string `json:"content"`
		} `json:"input"`
		Notify *struct {
			URL string `json:"url"`
		} `json:"notify"`
	} `json:"data"`
}

// ServeHTTP answers /initialize and /invoke, the two paths the load test
// calls.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/initialize" && r.Method == http.MethodPost:
		answer(w, http.StatusOK, []byte(`{"status":"ok"}`))
	case r.URL.Path == "/invoke" && r.Method == http.MethodPost:
		s.invoke(w, r)
	default:
		answer(w, http.StatusNotFound, []byte(`{"errorType":"not_found","errorMessage":"no route"}`))
	}
}

func (s *server) invoke(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, customruntime.DefaultMaxBody+1))
	var ev event
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	if err == nil && ev.ID == "" {
		err = fmt.Errorf("the event has no id")
	}
	if err != nil {
		fail(w, "bad_event", err)
		return
	}
	sum := sha256.Sum256([]byte(ev.ID))
	t := rawpipe.Task{Key: hex.EncodeToString(sum[:]), RequestID: r.Header.Get("x-fc-request-id"), Content: ev.Data.Input.Content}
	if ev.Data.Notify != nil {
		t.NotifyURL = ev.Data.Notify.URL
	}
	ctx := r.Context()
	if dl, ok := customruntime.Deadline(r.Header, time.Now()); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	o, err := s.p.Run(ctx, t)
	if err != nil {
		fail(w, "raw_failed", err)
		return
	}
	b, _ := json.Marshal(o)
	answer(w, http.StatusOK, b)
}

// fail answers as the function answers a failure FC must retry.
func fail(w http.ResponseWriter, typ string, err error) {
	b, _ := json.Marshal(map[string]string{"errorType": typ, "errorMessage": err.Error()})
	w.Header().Set("x-fc-status", "404")
	answer(w, http.StatusNotFound, b)
}

func answer(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
