package handler

import (
	"context"
	"sync"
)

// Hooks are the function's lifecycle callbacks, the same for both FC
// adapters (handler/customruntime and handler/go1). Any may be nil.
type Hooks struct {
	// Init warms the clients: POST /initialize, the go1 initializer.
	Init func(ctx context.Context) error
	// PreStop runs when FC announces that the instance may be destroyed or
	// frozen (GET /pre-stop, the go1 PreStop hook), once the invocations in
	// flight have finished: it flushes what is buffered. FC may invoke the
	// instance again afterwards, so it must leave it able to serve.
	PreStop func(ctx context.Context) error
	// Shutdown closes the clients when the process ends (SIGTERM), after
	// the invocations in flight have finished.
	Shutdown func(ctx context.Context) error
	// Secrets registers an invocation's credentials with the log redactor
	// until the invocation ends and calls release (logx.Redactor.Hold).
	Secrets func(values ...string) (release func())
}

// Inflight counts the invocations that run, so that pre-stop and shutdown
// can wait for them. Unlike a sync.WaitGroup it may be waited on while new
// invocations start (FC may invoke the instance after pre-stop). The zero
// value is ready.
type Inflight struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

// Begin counts an invocation until the returned func is called.
func (f *Inflight) Begin() (end func()) {
	f.mu.Lock()
	if f.n == 0 {
		f.idle = make(chan struct{})
	}
	f.n++
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		if f.n--; f.n == 0 {
			close(f.idle)
			f.idle = nil
		}
		f.mu.Unlock()
	}
}

// Wait returns when no invocation runs or ctx ends.
func (f *Inflight) Wait(ctx context.Context) {
	f.mu.Lock()
	idle := f.idle
	f.mu.Unlock()
	if idle == nil {
		return
	}
	select {
	case <-idle:
	case <-ctx.Done():
	}
}
