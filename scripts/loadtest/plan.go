package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Kind is how a delivery came about.
type Kind string

// The kinds of delivery.
const (
	KindFirst     Kind = "first"     // the first delivery of a business action
	KindRedeliver Kind = "redeliver" // the same event again, with a new FC request id
	KindDouble    Kind = "double"    // a double submit: new event id, same data
	KindBurst     Kind = "burst"     // a copy of the event sent at the same moment as the first
	KindPureDup   Kind = "pure-dup"  // a redelivery of an action that has already finished
	KindOp        Kind = "op"        // an operation of an in-process floor
)

// Mix weighs the duplicate kinds.
type Mix struct{ Redeliver, Double, Burst int }

func (m Mix) String() string {
	return fmt.Sprintf("redeliver=%d,double=%d,burst=%d", m.Redeliver, m.Double, m.Burst)
}

// ParseMix reads "redeliver=40,double=30,burst=30" (missing kinds weigh 0).
func ParseMix(s string) (Mix, error) {
	var m Mix
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, val, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(strings.TrimSpace(val))
		if !ok || err != nil || n < 0 || n > 1000 {
			return m, fmt.Errorf("%q: want name=weight with a weight from 0 to 1000", part)
		}
		switch strings.TrimSpace(name) {
		case "redeliver":
			m.Redeliver = n
		case "double":
			m.Double = n
		case "burst":
			m.Burst = n
		default:
			return m, fmt.Errorf("%q: kinds are redeliver, double, burst", name)
		}
	}
	if m.Redeliver+m.Double+m.Burst == 0 {
		return m, errors.New("all weights are 0")
	}
	return m, nil
}

// Action is one business action: one key K.
type Action struct {
	Index   int
	EventID string
	Body    []byte // the CloudEvent of the first delivery (and of redeliveries and bursts)
	Data    map[string]any
}

// Delivery is one request to send.
type Delivery struct {
	Action int
	Kind   Kind
	Body   []byte
}

// Unit is what the dispatcher sends at once: one delivery, or a burst whose
// members go out together to different instances.
type Unit struct{ Members []Delivery }

// Plan is the main phase of one run.
type Plan struct {
	Nonce   string
	Actions []Action
	Units   []Unit
	Counts  map[Kind]int // deliveries by kind
}

// Deliveries is the number of requests in the plan.
func (p *Plan) Deliveries() int {
	n := 0
	for _, u := range p.Units {
		n += len(u.Members)
	}
	return n
}

// Duplicates is the number of deliveries that are not the first of their action.
func (p *Plan) Duplicates() int { return p.Deliveries() - p.Counts[KindFirst] }

// filler makes each action's content about as long as the sample event's.
const filler = "Q3 revenue grew 12% year over year, driven by cloud subscriptions. Operating costs rose 4%; " +
	"the board approved a new data centre in Hangzhou."

// NewPlan builds n deliveries of which round(n·dupRate/100) are duplicates,
// split by mix. Bursts are capped at burstMax members (and at c, so that a
// burst's members are really in flight together); a duplicate that finds no
// room in a burst becomes a redelivery. Redeliveries and double submits come
// later in the stream than their first delivery, by up to 8·c units: the
// early ones meet the first still running (REPEAT_OTHER), the later ones a
// finished key (REPEAT_DONE).
func NewPlan(rng *rand.Rand, nonce string, n, c int, dupRate float64, mix Mix, burstMax int) *Plan {
	dups := int(math.Round(float64(n) * dupRate / 100))
	if dups >= n {
		dups = n - 1
	}
	p := &Plan{Nonce: nonce, Counts: map[Kind]int{}, Actions: newActions(nonce, n-dups, "")}
	bursts := make([]int, len(p.Actions)) // extra members of each action's first unit
	var later []timedUnit
	for range dups {
		if d, ok := p.drawDuplicate(rng, mix, bursts, min(burstMax, c), float64(8*c)); ok {
			later = append(later, d)
		}
	}
	p.schedule(bursts, later)
	return p
}

// newActions are u business actions, each with content of its own; with a
// notifyURL each asks for a notify POST there.
func newActions(nonce string, u int, notifyURL string) []Action {
	actions := make([]Action, 0, u)
	for i := range u {
		id := fmt.Sprintf("lt-%s-%06d", nonce, i)
		data := map[string]any{"tenant_id": "acme", "task_type": "summarize", "operation": "summarize",
			"input": map[string]any{"content": fmt.Sprintf("[loadtest %s action %d] %s", nonce, i, filler),
				"language": "en", "max_words": 60},
			"request_id": fmt.Sprintf("req-%s-%06d", nonce, i)}
		if notifyURL != "" {
			data["notify"] = map[string]any{"url": notifyURL}
		}
		actions = append(actions, Action{Index: i, EventID: id, Data: data, Body: cloudEvent(id, data)})
	}
	return actions
}

// timedUnit is a unit with its place in the stream (in units of actions).
type timedUnit struct {
	at float64
	u  Unit
}

// drawDuplicate draws one duplicate of a random action. A burst copy joins
// the action's first unit (counted in bursts; ok is false); any other
// duplicate is a unit of its own, up to lag after the first.
func (p *Plan) drawDuplicate(rng *rand.Rand, mix Mix, bursts []int, maxBurst int, lag float64) (timedUnit, bool) {
	u := len(p.Actions)
	a := rng.IntN(u)
	kind := KindRedeliver
	switch r := rng.IntN(mix.Redeliver + mix.Double + mix.Burst); {
	case r < mix.Redeliver:
	case r < mix.Redeliver+mix.Double:
		kind = KindDouble
	default:
		kind = KindBurst
	}
	if kind == KindBurst && maxBurst >= 2 {
		for try := 0; try < 8; try++ {
			if 1+bursts[a] < maxBurst {
				bursts[a]++
				p.Counts[KindBurst]++
				return timedUnit{}, false
			}
			a = rng.IntN(u)
		}
	}
	if kind == KindBurst { // no room in a burst
		kind = KindRedeliver
	}
	body := p.Actions[a].Body
	if kind == KindDouble {
		body = cloudEvent(fmt.Sprintf("lt-%s-%06d-d%d", p.Nonce, a, rng.IntN(1_000_000)), p.Actions[a].Data)
	}
	p.Counts[kind]++
	return timedUnit{at: float64(a) + 0.5 + rng.Float64()*lag,
		u: Unit{Members: []Delivery{{Action: a, Kind: kind, Body: body}}}}, true
}

// schedule orders the first units (with their burst copies) and the later
// duplicates by their place in the stream.
func (p *Plan) schedule(bursts []int, later []timedUnit) {
	all := make([]timedUnit, 0, len(p.Actions)+len(later))
	for i, a := range p.Actions {
		m := []Delivery{{Action: i, Kind: KindFirst, Body: a.Body}}
		for range bursts[i] {
			m = append(m, Delivery{Action: i, Kind: KindBurst, Body: a.Body})
		}
		all = append(all, timedUnit{at: float64(i), u: Unit{Members: m}})
	}
	p.Counts[KindFirst] = len(p.Actions)
	all = append(all, later...)
	slices.SortStableFunc(all, func(x, y timedUnit) int { return cmp.Compare(x.at, y.at) })
	for _, k := range all {
		p.Units = append(p.Units, k.u)
	}
}

// PureDuplicates is a phase of n redeliveries of the given (finished) actions,
// cycling through them.
func PureDuplicates(actions []Action, finished []int, n int) []Unit {
	if len(finished) == 0 {
		return nil
	}
	units := make([]Unit, n)
	for i := range units {
		a := finished[i%len(finished)]
		units[i] = Unit{Members: []Delivery{{Action: a, Kind: KindPureDup, Body: actions[a].Body}}}
	}
	return units
}

// cloudEvent is an EventBridge CloudEvent shaped like
// testdata/events/eventbridge-single.json.
func cloudEvent(id string, data map[string]any) []byte {
	ev := struct {
		ID                 string         `json:"id"`
		Source             string         `json:"source"`
		SpecVersion        string         `json:"specversion"`
		Type               string         `json:"type"`
		Subject            string         `json:"subject"`
		Time               string         `json:"time"`
		DataContentType    string         `json:"datacontenttype"`
		AliyunAccountID    string         `json:"aliyunaccountid"`
		AliyunPublishTime  string         `json:"aliyunpublishtime"`
		AliyunEventBusName string         `json:"aliyuneventbusname"`
		AliyunRegionID     string         `json:"aliyunregionid"`
		AliyunPublishAddr  string         `json:"aliyunpublishaddr"`
		Data               map[string]any `json:"data"`
	}{id, "idemgate.upstream", "1.0", "idemgate:Task:Submitted",
		"acs:eventbridge:cn-hangzhou:1234567890123456:eventbus/idemgate-bus/eventsource/idemgate.upstream",
		"2026-11-30T07:05:12.345Z", "application/json; charset=utf-8", "1234567890123456",
		"2026-11-30T07:05:12.401Z", "idemgate-bus", "cn-hangzhou", "10.0.12.34", data}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err) // only maps of strings and numbers
	}
	return b
}
