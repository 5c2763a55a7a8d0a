package proc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNoGalera: the Galera provider library (Debian's galera-4) was not found.
var ErrNoGalera = errors.New("no Galera provider (apt-get install galera-4)")

// GaleraProvider is where Debian's galera-4 installs the provider;
// IDEMGATE_TEST_GALERA names another.
const GaleraProvider = "/usr/lib/galera/libgalera_smm.so"

// Galera is a private MariaDB Galera cluster on loopback: every node a
// mariadbd of its own (data directory, tmpdir, SQL, group and IST ports),
// for the multi-writer drills (docs/operations.md).
type Galera struct {
	Nodes []*MariaDB
}

// GaleraOptions tune StartGalera.
type GaleraOptions struct {
	// RetryAutocommit is wsrep_retry_autocommit: how often a node itself
	// repeats an autocommit statement that lost certification before the
	// client sees error 1213. The server's default is 1; the drills use 0,
	// so that every conflict reaches the store.
	RetryAutocommit int
}

// StartGalera starts an n-node cluster under dir and returns once every
// node is Synced. One data directory is initialised (mariadb-install-db)
// and copied to each node; node 0 bootstraps the cluster
// (--wsrep-new-cluster), the others join it one at a time by a mysqldump
// state transfer (rsync's daemon drops to nobody under root and cannot
// write a private data directory; mariabackup is another package). The
// failure detector is tightened (evs.suspect_timeout 3 s, from 5) so that
// a killed node leaves the group within seconds. On an error every node
// started is killed.
func StartGalera(ctx context.Context, dir string, n int, o GaleraOptions) (*Galera, error) {
	server, install, err := mariadbBinaries()
	if err != nil {
		return nil, err
	}
	provider := os.Getenv("IDEMGATE_TEST_GALERA")
	if provider == "" {
		provider = GaleraProvider
	}
	if _, err := os.Stat(provider); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGalera, err)
	}
	seed := filepath.Join(dir, "seed")
	if err := installDB(ctx, install, seed, filepath.Join(dir, "seed-tmp")); err != nil {
		return nil, err
	}
	nodes := make([]galeraNode, n)
	for i := range nodes {
		if nodes[i], err = newGaleraNode(filepath.Join(dir, fmt.Sprintf("node%d", i))); err != nil {
			return nil, err
		}
		if out, err := exec.CommandContext(ctx, "cp", "-a", seed, nodes[i].data).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("copy the data directory: %w: %s", err, out)
		}
	}
	var members []string
	for _, nd := range nodes {
		members = append(members, "127.0.0.1:"+strconv.Itoa(nd.group))
	}
	g := &Galera{}
	for i, nd := range nodes {
		args := nd.args(provider, "gcomm://"+strings.Join(members, ","), o)
		if i == 0 {
			args = append(args, "--wsrep-new-cluster")
		}
		m, err := startNode(ctx, server, nd, args)
		if err != nil {
			g.Kill()
			return nil, fmt.Errorf("galera node %d: %w", i, err)
		}
		g.Nodes = append(g.Nodes, m)
	}
	return g, nil
}

// installDB initialises a data directory with a tmpdir of its own.
func installDB(ctx context.Context, install, data, tmp string) error {
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	inst := exec.CommandContext(ctx, install, "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db", "--innodb-buffer-pool-size=16M",
		"--innodb-log-file-size=8M", "--tmpdir="+tmp)
	inst.Env = append(os.Environ(), "TMPDIR="+tmp)
	if out, err := inst.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %w\n%s", err, Tail(string(out), 2000))
	}
	return nil
}

// galeraNode is one node's directory and ports.
type galeraNode struct {
	dir, data, tmp  string
	sql, group, ist int
}

func newGaleraNode(dir string) (galeraNode, error) {
	nd := galeraNode{dir: dir, data: filepath.Join(dir, "data"), tmp: filepath.Join(dir, "tmp")}
	if err := os.MkdirAll(nd.tmp, 0o700); err != nil {
		return nd, err
	}
	for _, p := range []*int{&nd.sql, &nd.group, &nd.ist} {
		var err error
		if *p, err = FreePort(); err != nil {
			return nd, err
		}
	}
	return nd, nil
}

// args are the node's mariadbd flags: three of them on two cores, so the
// buffer pools are tiny; ROW events and interleaved auto-increment locks,
// as Galera requires; everything on 127.0.0.1.
func (nd galeraNode) args(provider, cluster string, o GaleraOptions) []string {
	sqlAddr := "127.0.0.1:" + strconv.Itoa(nd.sql)
	group := "127.0.0.1:" + strconv.Itoa(nd.group)
	return []string{"--no-defaults", "--datadir=" + nd.data, "--user=root", "--bind-address=127.0.0.1",
		"--port=" + strconv.Itoa(nd.sql), "--socket=" + filepath.Join(nd.dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(nd.dir, "mariadbd.pid"), "--tmpdir=" + nd.tmp,
		"--innodb-buffer-pool-size=16M", "--innodb-log-file-size=8M", "--skip-log-bin",
		"--binlog-format=ROW", "--innodb-autoinc-lock-mode=2",
		"--wsrep-on=ON", "--wsrep-provider=" + provider, "--wsrep-cluster-name=idemgate-drill",
		"--wsrep-cluster-address=" + cluster, "--wsrep-node-address=" + group,
		"--wsrep-node-incoming-address=" + sqlAddr,
		"--wsrep-sst-method=mysqldump", "--wsrep-sst-auth=root:", "--wsrep-sst-receive-address=" + sqlAddr,
		"--wsrep-retry-autocommit=" + strconv.Itoa(o.RetryAutocommit),
		"--wsrep-provider-options=gmcast.listen_addr=tcp://" + group + ";ist.recv_addr=127.0.0.1:" + strconv.Itoa(nd.ist) +
			";gcache.size=16M;evs.suspect_timeout=PT3S;evs.inactive_timeout=PT5S;evs.install_timeout=PT5S"}
}

// startNode runs mariadbd with args and waits until the node is Synced.
func startNode(ctx context.Context, server string, nd galeraNode, args []string) (*MariaDB, error) {
	m := &MariaDB{Addr: "127.0.0.1:" + strconv.Itoa(nd.sql), LogPath: filepath.Join(nd.dir, "mariadbd.log"),
		exited: make(chan struct{})}
	log, err := os.Create(m.LogPath)
	if err != nil {
		return nil, err
	}
	m.cmd = exec.Command(server, args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	m.cmd.SysProcAttr = sysProcAttr() // a killed test leaves no node behind
	if err := m.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("mariadbd: %w", err)
	}
	go func() { _ = m.cmd.Wait(); log.Close(); close(m.exited) }()
	if err := m.awaitSynced(ctx, 60*time.Second); err != nil {
		_ = m.cmd.Process.Kill()
		<-m.exited
		b, _ := os.ReadFile(m.LogPath)
		return nil, fmt.Errorf("%w\n%s", err, Tail(string(b), 3000))
	}
	return m, nil
}

// awaitSynced polls until the node answers and reports wsrep_local_state
// 4 (Synced): it has joined and caught up.
func (m *MariaDB) awaitSynced(ctx context.Context, limit time.Duration) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(limit)
	for {
		c, cancel := context.WithTimeout(ctx, time.Second)
		var name, state string
		err = db.QueryRowContext(c, `SHOW GLOBAL STATUS LIKE 'wsrep_local_state'`).Scan(&name, &state)
		cancel()
		if err == nil && state == "4" {
			return nil
		}
		if err == nil {
			err = fmt.Errorf("wsrep_local_state %s", state)
		}
		select {
		case <-m.exited:
			return errors.New("mariadbd exited at start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not Synced within %s: %w", limit, err)
		}
	}
}

// DSNs are the DSNs of database db on every node, in node order, with
// causal reads and updates (wsrep_sync_wait=3, sent as a SET at connect): a
// statement waits until its node has applied what the cluster committed
// before it, so a task's UPDATE on one node finds the row its INSERT wrote
// on another (docs/operations.md, the Galera drill).
func (g *Galera) DSNs(db string) []string {
	var out []string
	for _, m := range g.Nodes {
		cfg := &mysql.Config{User: "root", Net: "tcp", Addr: m.Addr, DBName: db, AllowNativePasswords: true,
			Params: map[string]string{"wsrep_sync_wait": "3"}}
		out = append(out, cfg.FormatDSN())
	}
	return out
}

// KillNode ends node i with SIGKILL (no shutdown, as a crash) and waits for
// it; the others notice within evs.suspect_timeout and go on as a
// primary component of the rest when they are a majority.
func (g *Galera) KillNode(i int) {
	m := g.Nodes[i]
	select {
	case <-m.exited:
		return
	default:
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// Kill ends every node with SIGKILL: a test's cleanup, where a clean
// shutdown of each would only cost time. Nil-safe.
func (g *Galera) Kill() {
	if g == nil {
		return
	}
	for i := range g.Nodes {
		g.KillNode(i)
	}
}

// Status reads one GLOBAL STATUS counter (a name of letters and
// underscores) of every live node, by node (-1 for a node that does not
// answer).
func (g *Galera) Status(ctx context.Context, name string) []int64 {
	out := make([]int64, len(g.Nodes))
	if strings.Trim(name, "abcdefghijklmnopqrstuvwxyz_") != "" {
		panic("proc: not a status variable name: " + name)
	}
	for i, m := range g.Nodes {
		out[i] = -1
		select {
		case <-m.exited:
			continue
		default:
		}
		db, err := sql.Open("mysql", m.DSN(""))
		if err != nil {
			continue
		}
		c, cancel := context.WithTimeout(ctx, 3*time.Second)
		var n string
		if db.QueryRowContext(c, "SHOW GLOBAL STATUS LIKE '"+name+"'").Scan(new(string), &n) == nil {
			out[i], _ = strconv.ParseInt(n, 10, 64)
		}
		cancel()
		db.Close()
	}
	return out
}
