package event

import (
	"encoding/json"
	"time"
)

// Timer payloads: "sweep" runs the sweeper (docs/design.md §10), "purge" the
// retention's purge (docs/operations.md).
const (
	TimerPayloadSweep = "sweep"
	TimerPayloadPurge = "purge"
)

// Timer is an FC timer-trigger event:
//
//	{"triggerTime":"2026-11-30T07:00:00Z","triggerName":"sweep","payload":"sweep"}
type Timer struct {
	TriggerTime time.Time
	TriggerName string
	// Payload is the trigger's configured payload; Parse accepts only
	// TimerPayloadSweep and TimerPayloadPurge, so a mistyped trigger fails
	// loudly instead of doing nothing.
	Payload string
}

func parseTimer(obj map[string]json.RawMessage) (*Timer, error) {
	var t Timer
	var ts string
	if !present(obj, "triggerTime") || json.Unmarshal(obj["triggerTime"], &ts) != nil {
		return nil, newError(TypeInvalidRequest, "triggerTime", "a timer event needs triggerTime as an RFC 3339 string")
	}
	tt, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, newError(TypeInvalidRequest, "triggerTime", "not an RFC 3339 timestamp: %q", ts)
	}
	t.TriggerTime = tt
	if !present(obj, "triggerName") || json.Unmarshal(obj["triggerName"], &t.TriggerName) != nil || t.TriggerName == "" {
		return nil, newError(TypeInvalidRequest, "triggerName", "a timer event needs a non-empty triggerName string")
	}
	if present(obj, "payload") && json.Unmarshal(obj["payload"], &t.Payload) != nil {
		return nil, newError(TypeInvalidRequest, "payload", "must be a string")
	}
	if t.Payload != TimerPayloadSweep && t.Payload != TimerPayloadPurge {
		return nil, newError(TypeUnsupportedEvent, "payload", "timer %q has payload %q; the timer actions are %q and %q",
			t.TriggerName, t.Payload, TimerPayloadSweep, TimerPayloadPurge)
	}
	return &t, nil
}
