package ossresult

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff bounds. The SDK (v3.0.2) retries nothing itself: its RetryTimes
// setting is never read, so every retry is this loop's.
const (
	backoffBase = 50 * time.Millisecond
	backoffCap  = 2 * time.Second
)

// retry runs try, each attempt under its own HTTP timeout, until it succeeds,
// fails for good, the retry budget is spent or ctx would end before the next
// attempt could start; it then returns the last error, which stays retryable
// so the caller's retry policy (FC) can take over.
func (b *OSSBucket) retry(ctx context.Context, try func(context.Context) error) error {
	for n := 0; ; n++ {
		actx, cancel := context.WithTimeout(ctx, b.timeout)
		err := try(actx)
		cancel()
		if err == nil || !Retryable(err) || n >= b.retries {
			return err
		}
		wait := backoff(n)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// backoff is exponential with jitter in [d/2, d): spread, but never zero.
func backoff(n int) time.Duration {
	d := backoffCap
	if n < 16 {
		d = min(backoffBase<<n, backoffCap)
	}
	return d/2 + rand.N(d/2)
}
