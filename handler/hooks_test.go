package handler

import (
	"context"
	"testing"
	"time"
)

func TestInflightWait(t *testing.T) {
	var fl Inflight
	end := fl.Begin()

	short, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	fl.Wait(short) // must give up at the deadline
	if short.Err() == nil {
		t.Fatal("Wait returned before the invocation ended or the deadline passed")
	}

	done := make(chan struct{})
	go func() { fl.Wait(context.Background()); close(done) }()
	select {
	case <-done:
		t.Fatal("Wait returned while an invocation runs")
	case <-time.After(20 * time.Millisecond):
	}
	end()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Wait did not return after the invocation ended")
	}
	fl.Wait(context.Background()) // idle: returns at once

	// New invocations may start while someone waits (after pre-stop).
	end = fl.Begin()
	go fl.Wait(context.Background())
	end2 := fl.Begin()
	end()
	end2()
	fl.Wait(context.Background())
}
