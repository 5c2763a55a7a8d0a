package netrig

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Delay modes (-delay-mode).
const (
	ModeAuto  = "auto"  // netem when the kernel has it, else the proxy
	ModeNetem = "netem" // tc qdisc netem on the veths of Redis and MariaDB
	ModeProxy = "proxy" // the rig's delaying TCP proxy in the server's namespace
	ModeNone  = "none"  // the resolved mode of a zero delay: servers reached directly
)

// ErrNoNetem: the kernel cannot add a netem qdisc.
var ErrNoNetem = errors.New("the kernel has no netem qdisc (sch_netem): tc cannot set a latency here; use -delay-mode proxy")

// Preflight checks what a rig of the mode needs before anything is made:
// root (ip netns needs CAP_SYS_ADMIN and CAP_NET_ADMIN), ip, taskset, and tc
// for netem and auto (which probes for netem) when delay > 0. The error
// names what is missing.
func Preflight(mode string, delay time.Duration, lookPath func(string) (string, error), euid int) error {
	switch mode {
	case ModeAuto, ModeNetem, ModeProxy:
	default:
		return fmt.Errorf("-delay-mode %q: want %s, %s or %s", mode, ModeAuto, ModeNetem, ModeProxy)
	}
	if delay < 0 || delay > time.Second {
		return fmt.Errorf("delay %s: want 0 to 1s", delay)
	}
	var missing []string
	if euid != 0 {
		missing = append(missing, "root privilege (ip netns add needs CAP_SYS_ADMIN and CAP_NET_ADMIN; run as root)")
	}
	tools := []string{"ip", "taskset"}
	if delay > 0 && mode != ModeProxy {
		tools = append(tools, "tc")
	}
	for _, t := range tools {
		if _, err := lookPath(t); err != nil {
			why := map[string]string{"ip": "iproute2: namespaces and veths", "taskset": "util-linux: CPU pinning",
				"tc": "iproute2: the netem qdisc of -delay-mode " + mode + "; -delay-mode proxy needs no tc"}[t]
			missing = append(missing, fmt.Sprintf("%s not found on PATH (%s)", t, why))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("netrig cannot run: %s", strings.Join(missing, "; "))
	}
	return nil
}

// Netem puts a one-way delay on both directions of role's link: the
// qdisc of the role's own veth end delays what it sends, the hub end's
// what it receives. ErrNoNetem when the kernel lacks the qdisc.
func (n *Net) Netem(ctx context.Context, role string, delay time.Duration) error {
	d := fmt.Sprintf("%dus", delay.Microseconds())
	for _, s := range [][]string{{n.NS[role], "eth0"}, {nsName(n.Owner, roleHub), "v-" + role}} {
		err := run(ctx, "ip", "netns", "exec", s[0], "tc", "qdisc", "replace", "dev", s[1], "root", "netem", "delay", d)
		if err != nil {
			if strings.Contains(err.Error(), "qdisc kind is unknown") || strings.Contains(err.Error(), "No such file") {
				return fmt.Errorf("%w (%v)", ErrNoNetem, err)
			}
			return fmt.Errorf("netem on %s's link: %w", role, err)
		}
	}
	return nil
}

// ProbeNetem says whether netem can be set, by trying it on the load
// generator's link with a zero delay and removing it again.
func (n *Net) ProbeNetem(ctx context.Context) error {
	if err := n.Netem(ctx, RoleGen, 0); err != nil {
		return err
	}
	for _, s := range [][]string{{n.NS[RoleGen], "eth0"}, {nsName(n.Owner, roleHub), "v-" + RoleGen}} {
		if err := run(ctx, "ip", "netns", "exec", s[0], "tc", "qdisc", "del", "dev", s[1], "root"); err != nil {
			return err
		}
	}
	return nil
}

// ResolveMode picks the delay mechanism: none for a zero delay; for auto,
// netem when ProbeNetem succeeds, else the proxy. say receives the loud
// line that names the choice and why.
func (n *Net) ResolveMode(ctx context.Context, mode string, delay time.Duration, say func(string)) (string, error) {
	if delay == 0 {
		say("delay 0: Redis and MariaDB reached directly over the veths (no netem, no proxy)")
		return ModeNone, nil
	}
	switch mode {
	case ModeNetem:
		if err := n.ProbeNetem(ctx); err != nil {
			return "", err
		}
		say(fmt.Sprintf("DELAY MODE netem: %s one way on the links to Redis and MariaDB (tc qdisc netem)", delay))
		return ModeNetem, nil
	case ModeProxy:
		say(fmt.Sprintf("DELAY MODE proxy: %s one way, each direction, by the rig's delaying TCP proxy in the server's namespace; its CPU is reported apart", delay))
		return ModeProxy, nil
	}
	err := n.ProbeNetem(ctx)
	if err == nil {
		say(fmt.Sprintf("DELAY MODE auto → netem: %s one way on the links to Redis and MariaDB", delay))
		return ModeNetem, nil
	}
	if !errors.Is(err, ErrNoNetem) {
		return "", err
	}
	say(fmt.Sprintf("DELAY MODE auto → proxy: %v. %s one way, each direction, by the rig's delaying TCP proxy in the server's namespace; its CPU is reported apart", err, delay))
	return ModeProxy, nil
}

// LookPath is exec.LookPath; Preflight takes it as a parameter so that its
// test can hide a tool.
var LookPath = exec.LookPath

// Euid is os.Geteuid, for the same reason.
var Euid = os.Geteuid
