// Package netrig builds the network of scripts/netrig, the benchmark rig of
// issue 41: a network namespace for each of the load generator, the
// function's instances, Redis and MariaDB, joined by veth pairs to a bridge
// in a namespace of its own, on addresses of a private range that exist only
// inside those namespaces (nothing is routed to them from the host's
// namespace); a one-way delay on the links to Redis and MariaDB (netem, or
// this package's delaying TCP proxy when the kernel has no netem); and the
// CPUs each side is pinned to. Everything it creates carries the rig's
// prefix and the owner's process id, so that Close (and a later run, for
// the namespaces of an owner that died) removes exactly what it made.
// Development only: nothing in the function imports it.
package netrig

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Roles of the rig's namespaces.
const (
	RoleGen      = "gen"   // the load generator (and its fakes)
	RoleFunction = "fn"    // the function's instances
	RoleRedis    = "redis" // Redis (and its delay proxy)
	RoleMySQL    = "mysql" // MariaDB (and its delay proxy)
	roleHub      = "hub"   // the bridge
)

// Roles lists the namespaces that hold processes, in address order.
var Roles = []string{RoleGen, RoleFunction, RoleRedis, RoleMySQL}

// Prefix starts the name of every namespace the rig creates:
// <Prefix><owner pid>-<role>.
const Prefix = "igrig"

// Subnet is the rig's private range; role i of Roles has .(i+1). It exists
// only inside the rig's namespaces.
const Subnet = "10.203.0"

// Net is the rig's set of namespaces.
type Net struct {
	Owner int               // the process id in every name
	NS    map[string]string // role → namespace name
	Addr  map[string]string // role → IPv4 address inside its namespace
	made  []string          // namespaces created, for Close
}

// nsName is the namespace of role for owner.
func nsName(owner int, role string) string { return fmt.Sprintf("%s%d-%s", Prefix, owner, role) }

// run runs a command and returns a clear error with its output.
func run(ctx context.Context, name string, args ...string) error {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// Create makes the namespaces, the bridge and the veth pairs of owner
// (normally os.Getpid()). On an error it removes what it made.
func Create(ctx context.Context, owner int) (*Net, error) {
	n := &Net{Owner: owner, NS: map[string]string{}, Addr: map[string]string{}}
	if err := n.create(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Net) create(ctx context.Context) error {
	hub := nsName(n.Owner, roleHub)
	for _, ns := range append([]string{hub}, n.names()...) {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
		n.made = append(n.made, ns)
		if err := run(ctx, "ip", "-n", ns, "link", "set", "lo", "up"); err != nil {
			return err
		}
	}
	steps := [][]string{{"-n", hub, "link", "add", "br0", "type", "bridge"}, {"-n", hub, "link", "set", "br0", "up"}}
	for i, role := range Roles {
		ns, addr := n.NS[role], fmt.Sprintf("%s.%d", Subnet, i+1)
		n.Addr[role] = addr
		// The veth is made inside the hub and its peer moved straight into
		// the role's namespace: no name ever appears in the host's.
		steps = append(steps,
			[]string{"-n", hub, "link", "add", "v-" + role, "type", "veth", "peer", "name", "eth0", "netns", ns},
			[]string{"-n", hub, "link", "set", "v-" + role, "master", "br0", "up"},
			[]string{"-n", ns, "addr", "add", addr + "/24", "dev", "eth0"},
			[]string{"-n", ns, "link", "set", "eth0", "up"})
	}
	for _, s := range steps {
		if err := run(ctx, "ip", s...); err != nil {
			return err
		}
	}
	return nil
}

// names fills n.NS and returns the role namespaces' names.
func (n *Net) names() []string {
	var out []string
	for _, role := range Roles {
		n.NS[role] = nsName(n.Owner, role)
		out = append(out, n.NS[role])
	}
	return out
}

// Exec is the command prefix that runs a program in role's namespace,
// pinned to cpus ("": not pinned). Both ip netns exec and taskset exec the
// program, so its process id is the one started.
func (n *Net) Exec(role, cpus string) []string {
	w := []string{"ip", "netns", "exec", n.NS[role]}
	if cpus != "" {
		w = append(w, "taskset", "-c", cpus)
	}
	return w
}

// Close ends every process still inside the rig's namespaces (SIGTERM,
// then SIGKILL after 5 s) and deletes the namespaces, which removes the
// veths and the bridge. It returns what could not be removed.
func (n *Net) Close() error {
	return removeNamespaces(n.made)
}

// removeNamespaces ends the processes in each namespace and deletes it.
func removeNamespaces(names []string) error {
	var errs []error
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		pids := pidsIn(names)
		for _, p := range pids {
			_ = syscall.Kill(p, sig)
		}
		for deadline := time.Now().Add(5 * time.Second); len(pids) > 0 && time.Now().Before(deadline); pids = pidsIn(names) {
			time.Sleep(50 * time.Millisecond)
		}
		if len(pids) == 0 {
			break
		}
	}
	for _, ns := range names {
		if err := run(context.Background(), "ip", "netns", "del", ns); err != nil && exists(ns) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pidsIn lists the processes inside the namespaces (ip netns pids).
func pidsIn(names []string) []int {
	var pids []int
	for _, ns := range names {
		out, err := exec.Command("ip", "netns", "pids", ns).Output()
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(out)) {
			if p, err := strconv.Atoi(f); err == nil {
				pids = append(pids, p)
			}
		}
	}
	return pids
}

// exists says whether a namespace of that name is still listed.
func exists(ns string) bool { return contains(List(), ns) }

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// List is the names of the rig's namespaces that exist now (any owner).
func List() []string {
	out, err := exec.Command("ip", "netns", "list").Output()
	if err != nil {
		return nil
	}
	var names []string
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && strings.HasPrefix(f[0], Prefix) {
			names = append(names, f[0])
		}
	}
	return names
}

// Leftovers lists what of owner's rig still exists: namespaces, and
// processes inside them. Empty after a successful Close.
func Leftovers(owner int) []string {
	var left, mine []string
	for _, ns := range List() {
		if strings.HasPrefix(ns, fmt.Sprintf("%s%d-", Prefix, owner)) {
			mine = append(mine, ns)
			left = append(left, "namespace "+ns)
		}
	}
	for _, p := range pidsIn(mine) {
		left = append(left, fmt.Sprintf("process %d", p))
	}
	return left
}

// RemoveStale deletes the namespaces of rigs whose owner process no longer
// runs (a rig killed with SIGKILL cannot clean up after itself), and
// returns their names. A running rig's namespaces are left alone.
func RemoveStale() ([]string, error) {
	var stale []string
	for _, ns := range List() {
		owner, ok := ownerOf(ns)
		if ok && owner != os.Getpid() && !alive(owner) {
			stale = append(stale, ns)
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	return stale, removeNamespaces(stale)
}

// ownerOf reads the owner pid from a rig namespace's name.
func ownerOf(ns string) (int, bool) {
	rest, ok := strings.CutPrefix(ns, Prefix)
	if !ok {
		return 0, false
	}
	pid, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	p, err := strconv.Atoi(pid)
	return p, err == nil && p > 0
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
