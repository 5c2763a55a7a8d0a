package main

import (
	"net/http"
	"time"

	"github.com/idemgate/idemgate/internal/dev/modelfake"
)

// startModel starts the model fake: each call answers after 50–400 ms, and
// errorRate of them fail retryably, 503 (4/7) or 429 (3/7).
func startModel(rnd *lockedRand, errorRate float64) *modelfake.Fake {
	m := modelfake.Start()
	m.Set(func(int64) (time.Duration, int) {
		delay := rnd.Between(50*time.Millisecond, 400*time.Millisecond)
		switch roll := rnd.Float64(); {
		case roll < errorRate*4/7:
			return delay, http.StatusServiceUnavailable
		case roll < errorRate:
			return delay, http.StatusTooManyRequests
		}
		return delay, http.StatusOK
	})
	return m
}
