package sleep

import (
	"context"
	"testing"
	"time"
)

func TestFor(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"the duration passes", context.Background(), time.Millisecond, true},
		{"the context has ended", cancelled, time.Hour, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := For(c.ctx, c.d); got != c.want {
				t.Fatalf("For = %v, want %v", got, c.want)
			}
		})
	}
}
