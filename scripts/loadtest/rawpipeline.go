package main

import (
	"context"
	"database/sql"
	"time"

	"github.com/idemgate/idemgate/handler/llm"
	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/rawpipe"
	"github.com/idemgate/idemgate/ossresult"
)

// rawPipeline is the first delivery's floor (internal/dev/rawpipe) run
// inside the load generator, against the same MySQL, fake OSS, model
// endpoint and notify receiver as the function. It shares the generator's
// CPU with the fakes; the raw function (scripts/loadtest/rawfn) runs the
// same work in processes of their own, measured like the instances.
type rawPipeline struct {
	p         *rawpipe.Pipeline
	notifyURL string
}

func newRawPipeline(db *sql.DB, f *fakes) (*rawPipeline, error) {
	oss, err := ossresult.NewOSS(f.ossCfg)
	if err != nil {
		return nil, err
	}
	b, err := oss.With(f.creds)
	if err != nil {
		return nil, err
	}
	m, err := llm.NewHTTPClient(llm.Config{BaseURL: f.model.URL, APIKey: modelfake.APIKey, Model: "qwen-plus", Timeout: time.Minute})
	if err != nil {
		return nil, err
	}
	allow, err := notify.ParseAllowList(f.allowed)
	if err != nil {
		return nil, err
	}
	n := notify.New(notify.Options{Timeout: 10 * time.Second, Allow: allow, SigningSecret: f.signingSecret})
	return &rawPipeline{p: &rawpipe.Pipeline{DB: db, Bucket: b, Model: m, Notify: n}, notifyURL: f.notifyURL}, nil
}

// op is one task on a fresh key, with one notify POST when withNotify.
func (p *rawPipeline) op(withNotify bool) func(context.Context, int) error {
	return func(ctx context.Context, _ int) error {
		k := randKey()
		t := rawpipe.Task{Key: k, RequestID: "raw-" + k[:16], Content: "[raw] " + filler}
		if withNotify {
			t.NotifyURL = p.notifyURL
		}
		_, err := p.p.Run(ctx, t)
		return err
	}
}
