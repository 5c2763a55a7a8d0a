package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/handler/notify"
	"github.com/idemgate/idemgate/internal/dev/modelfake"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/ossresult"
	"github.com/idemgate/idemgate/ossresult/ossfake"
)

// The fake OSS's bucket and region. The access key and the notify signing
// secret are drawn per run (fakes only: nothing real is signed with them).
const (
	fakeBucket = "idemgate-load"
	fakeRegion = "cn-hangzhou"
)

// fakes are the external services of a first delivery, on loopback inside
// the load generator: the OSS that checks V4 signatures (ossresult/ossfake),
// a chat-completions endpoint (internal/dev/modelfake) and a notify
// receiver. The spawned instances and the raw-pipeline floor both use them,
// so the two pay for the same external work.
type fakes struct {
	oss                *ossfake.Server
	model              *modelfake.Fake
	recv               *receiver
	keyID, keySecret   string
	signingSecret      string
	notifyURL, allowed string // the receiver's URL; its NOTIFY_ALLOWED_HOSTS entry
	creds              ossresult.Credentials
	ossCfg             ossresult.OSSConfig
}

// startFakes starts the three services on ports of host ("": loopback; an
// address of the rig's load-generator namespace, which the instances reach).
func startFakes(host string) (*fakes, error) {
	f := &fakes{keyID: "LTAI" + proc.Nonce(), keySecret: proc.Nonce() + proc.Nonce(), signingSecret: proc.Nonce() + proc.Nonce() + proc.Nonce() + proc.Nonce()}
	cfg := ossfake.Config{Bucket: fakeBucket, Region: fakeRegion, AccessKeyID: f.keyID,
		AccessKeySecret: f.keySecret, RequireTag: ossresult.TagKind, RequireTagPrefix: "tasks/"}
	listen, flag := "127.0.0.1:0", ";loopback"
	var err error
	if host == "" {
		f.oss, f.model = ossfake.New(cfg), modelfake.Start()
	} else {
		// A private address needs its flag as loopback does (docs/operations.md, NOTIFY_ALLOWED_HOSTS).
		listen, flag = net.JoinHostPort(host, "0"), ";private"
		if f.oss, err = ossfake.Listen(cfg, listen); err != nil {
			return nil, fmt.Errorf("fake OSS: %w", err)
		}
		if f.model, err = modelfake.StartAt(listen); err != nil {
			f.oss.Close()
			return nil, fmt.Errorf("fake model: %w", err)
		}
	}
	if f.recv, err = startReceiver(listen, f.signingSecret); err != nil {
		f.close()
		return nil, err
	}
	f.notifyURL = "http://" + f.recv.addr + "/notify"
	// Loopback needs its flag (docs/operations.md, NOTIFY_ALLOWED_HOSTS).
	f.allowed = "http://" + f.recv.addr + flag
	f.creds = ossresult.Credentials{AccessKeyID: f.keyID, AccessKeySecret: f.keySecret}
	f.ossCfg = ossresult.OSSConfig{Endpoint: f.oss.Endpoint(), Bucket: fakeBucket, Region: fakeRegion}
	return f, nil
}

// env is the function's configuration for the fakes.
func (f *fakes) env() []string {
	return append(f.model.Env(), "OSS_ENDPOINT="+f.oss.Endpoint(), "OSS_BUCKET="+fakeBucket, "OSS_REGION="+fakeRegion,
		"ALIBABA_CLOUD_ACCESS_KEY_ID="+f.keyID, "ALIBABA_CLOUD_ACCESS_KEY_SECRET="+f.keySecret,
		"NOTIFY_ALLOWED_HOSTS="+f.allowed, "NOTIFY_SIGNING_SECRET="+f.signingSecret)
}

// close stops what startFakes started (once: startFakes on its failure, or
// the runner's teardown).
func (f *fakes) close() {
	if f.recv != nil {
		f.recv.close()
	}
	f.model.Close()
	f.oss.Close()
}

// objectsByKey counts the attempt outputs (tasks/<K>/attempt-NNN/output.json)
// and all the objects (tasks/<K>/…) the fake OSS holds, by business key.
func (f *fakes) objectsByKey() (outputs, all map[string]int) {
	outputs, all = map[string]int{}, map[string]int{}
	for key := range f.oss.Objects() {
		parts := strings.Split(key, "/")
		if len(parts) < 3 || parts[0] != "tasks" {
			continue
		}
		all[parts[1]]++
		if ossresult.KindOf(key) == ossresult.KindAttempt {
			outputs[parts[1]]++
		}
	}
	return outputs, all
}

// receiver is the notify endpoint: it checks each POST's signature and
// counts the POSTs per business key (the Idempotency-Key less its suffix).
type receiver struct {
	addr   string
	secret string
	srv    *http.Server
	mu     sync.Mutex
	byKey  map[string]int
	bad    int
}

func startReceiver(listen, secret string) (*receiver, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	r := &receiver{addr: ln.Addr().String(), secret: secret, byKey: map[string]int{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	return r, nil
}

// ServeHTTP answers 200 to a signed POST, 401 to anything else.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	key, _ := strings.CutSuffix(req.Header.Get("Idempotency-Key"), notify.KeySuffix)
	ok := err == nil && req.Method == http.MethodPost && key != "" &&
		notify.Verify(r.secret, req.Header.Get(notify.SignatureHeader), body, 5*time.Minute) == nil
	r.mu.Lock()
	if ok {
		r.byKey[key]++
	} else {
		r.bad++
	}
	r.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// posts is how many signed POSTs named key.
func (r *receiver) posts(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.byKey[key]
}

// refused is how many requests failed the receiver's checks.
func (r *receiver) refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bad
}

func (r *receiver) close() {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(c)
}

// String keeps the fakes' secrets out of any print.
func (f *fakes) String() string {
	return fmt.Sprintf("fakes{oss:%s model:%s notify:%s}", f.oss.Endpoint(), f.model.URL, f.notifyURL)
}
