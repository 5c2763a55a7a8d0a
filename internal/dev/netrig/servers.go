package netrig

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// Ports of the servers on their namespace's address: direct, and through
// the delay proxy.
const (
	RedisPort      = 6379
	MySQLPort      = 3306
	RedisProxyPort = 16379
	MySQLProxyPort = 13306
)

// Process is a server the rig started in one of its namespaces.
type Process struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// Pid is the process id (ip netns exec and taskset exec the program).
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// start runs wrap + argv with its output in logPath (stdout to out when
// given).
func start(name string, wrap, argv []string, logPath string, out io.Writer) (*Process, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	all := append(append([]string{}, wrap...), argv...)
	p := &Process{Name: name, LogPath: logPath, cmd: exec.Command(all[0], all[1:]...), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = log, log
	if out != nil {
		p.cmd.Stdout = out
	}
	if err := p.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = p.cmd.Wait(); log.Close(); close(p.exited) }()
	return p, nil
}

// Stop ends the process: SIGTERM, SIGKILL after grace (proc.Terminate:
// bounded, whatever state the process is in); it reports whether the
// process exited. Nil-safe.
func (p *Process) Stop(grace time.Duration) bool {
	if p == nil {
		return true
	}
	return proc.Terminate(p.cmd.Process, p.exited, grace)
}

// Alive says whether the process has not exited.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// StartRedis runs a private redis-server (proc.StartRedisWith: no
// persistence, its log under dir) in the Redis namespace on its address,
// pinned to cpus, and waits until it answers PING from inside the
// namespace.
func (n *Net) StartRedis(ctx context.Context, dir, cpus string) (*proc.Redis, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	addr := n.Addr[RoleRedis]
	probe := append(n.Exec(RoleRedis, ""), "redis-cli", "-h", addr, "-p", strconv.Itoa(RedisPort), "ping")
	r, err := proc.StartRedisWith(ctx, dir, proc.RedisOptions{Placement: proc.Placement{Wrap: n.Exec(RoleRedis, cpus),
		Host: addr, Port: RedisPort, Args: []string{"--protected-mode", "no"}},
		Ready: func(ctx context.Context, _ *proc.Redis) error {
			out, err := exec.CommandContext(ctx, probe[0], probe[1:]...).Output()
			if err == nil && strings.TrimSpace(string(out)) != "PONG" {
				err = fmt.Errorf("PING answered %q", out)
			}
			return err
		}})
	if err != nil {
		return nil, fmt.Errorf("redis in %s: %w", n.NS[RoleRedis], err)
	}
	return r, nil
}

// StartMariaDB runs a private MariaDB (proc.StartMariaDBWith: its own data
// directory and tmpdir under dir) in the MariaDB namespace on its address,
// pinned to cpus, accepting maxConns connections, and lets root in from the
// rig's range (the data directory has root@localhost only): ready when
// mariadb answers on its Unix socket, which is a path and so reachable from
// here.
func (n *Net) StartMariaDB(ctx context.Context, dir, cpus string, maxConns int) (*proc.MariaDB, error) {
	client, err := exec.LookPath("mariadb")
	if err != nil {
		return nil, fmt.Errorf("mariadb (the client) not found on PATH: the rig grants root on its range with it: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	sql := func(ctx context.Context, m *proc.MariaDB, stmt string) error {
		out, err := exec.CommandContext(ctx, client, "--no-defaults", "-uroot", "--socket="+m.Socket(),
			"--connect-timeout=1", "-e", stmt).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	m, err := proc.StartMariaDBWith(ctx, dir, proc.MariaDBOptions{Placement: proc.Placement{Wrap: n.Exec(RoleMySQL, cpus),
		Host: n.Addr[RoleMySQL], Port: MySQLPort, Args: []string{"--skip-name-resolve", "--max-connections=" + strconv.Itoa(maxConns),
			proc.LoadRedoLog}},
		Ready: func(ctx context.Context, m *proc.MariaDB) error { return sql(ctx, m, "SELECT 1") }})
	if err != nil {
		return nil, err
	}
	host := Subnet + ".%"
	if err := sql(ctx, m, fmt.Sprintf("CREATE USER 'root'@'%s'; GRANT ALL ON *.* TO 'root'@'%s'", host, host)); err != nil {
		m.Stop()
		return nil, fmt.Errorf("grant root on %s: %w", host, err)
	}
	return m, nil
}

// StartProxy runs the delay proxy (self is this program, whose "proxy"
// subcommand serves it) in role's namespace, pinned to cpus, in front of
// the server on upstream port; it is ready once it printed its address.
// At SIGTERM it writes its Stats as JSON to statsPath.
func (n *Net) StartProxy(ctx context.Context, self, role string, listenPort, upstreamPort int, delay time.Duration,
	cpus, dir string) (*Process, error) {
	addr := n.Addr[role]
	pr, pw := io.Pipe()
	statsPath := filepath.Join(dir, "proxy-"+role+".json")
	p, err := start("proxy-"+role, n.Exec(role, cpus), []string{self, "proxy",
		"-listen", fmt.Sprintf("%s:%d", addr, listenPort), "-to", fmt.Sprintf("%s:%d", addr, upstreamPort),
		"-delay", delay.String(), "-stats", statsPath}, filepath.Join(dir, "proxy-"+role+".log"), pw)
	if err != nil {
		return nil, err
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() { <-p.exited; pw.Close() }()
	select {
	case l, ok := <-line:
		if ok && strings.HasPrefix(l, "listening ") {
			return p, nil
		}
		p.Stop(2 * time.Second)
		b, _ := os.ReadFile(p.LogPath)
		return nil, fmt.Errorf("proxy in %s did not start: %q %s", n.NS[role], l, b)
	case <-time.After(10 * time.Second):
		p.Stop(2 * time.Second)
		return nil, errors.New("proxy in " + n.NS[role] + " did not start within 10 s")
	case <-ctx.Done():
		p.Stop(2 * time.Second)
		return nil, ctx.Err()
	}
}
