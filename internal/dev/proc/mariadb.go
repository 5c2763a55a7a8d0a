package proc

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"
)

// ErrNoMariaDB: mariadbd or mariadb-install-db was not found.
var ErrNoMariaDB = errors.New("no MariaDB server binaries")

// MariaDB is a private MariaDB server: for measurements and tests that read
// the server's GLOBAL counters (SHOW GLOBAL STATUS), which every client of a
// shared server moves, a database of one's own notwithstanding.
type MariaDB struct {
	Addr    string // 127.0.0.1:<port>
	LogPath string
	DataDir string
	cmd     *exec.Cmd
	exited  chan struct{}
}

// StartMariaDB initialises a data directory under dir (mariadb-install-db)
// and starts mariadbd on a free loopback port, returning once it answers.
// Durability settings are the server's defaults (innodb_flush_log_at_trx_commit=1,
// no binary log); the buffer pool and the redo log are small.
// IDEMGATE_TEST_MARIADBD names mariadbd (default: on PATH, else /usr/sbin);
// mariadb-install-db is looked for beside it, then on PATH.
func StartMariaDB(ctx context.Context, dir string) (*MariaDB, error) {
	return StartMariaDBWith(ctx, dir, MariaDBOptions{})
}

// MariaDBOptions place a private server elsewhere than a loopback port of
// the caller's network namespace. The zero value is StartMariaDB's.
type MariaDBOptions struct {
	// ServerOptions are the replication settings (none: no binary log).
	ServerOptions
	// Placement: where it runs and listens; Args e.g. --skip-name-resolve.
	Placement
	// Ready reports whether the server answers; default: a ping over its
	// DSN from this process (which cannot reach another namespace).
	Ready func(ctx context.Context, m *MariaDB) error
}

// LoadRedoLog is the redo log of a private server under sustained load (the
// load test's, the rig's; Placement.Args): the default 16 MiB fills within
// seconds of a load test's writes, and once the checkpoint age reaches the
// log's capacity every write waits for a checkpoint. The rig saw such a
// wait last 42 s (scripts/netrig's first-delivery/mysql "complete: context
// deadline exceeded"); a production server's redo log is gigabytes.
const LoadRedoLog = "--innodb-log-file-size=512M"

// StartMariaDBWith is StartMariaDB placed as o says.
func StartMariaDBWith(ctx context.Context, dir string, o MariaDBOptions) (*MariaDB, error) {
	server, install, err := mariadbBinaries()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// A tmpdir of its own, for the bootstrap too: mariadbd deletes every #sql*
	// file in its tmpdir at start, which under the default /tmp removes another
	// server's live temporary tables ("Error on delete of '/tmp/#sql-temptable-…'").
	tmp := filepath.Join(dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	tuning := []string{"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M", "--tmpdir=" + tmp}
	inst := exec.CommandContext(ctx, install, append([]string{"--no-defaults", "--datadir=" + data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db"}, tuning...)...)
	inst.Env = append(os.Environ(), "TMPDIR="+tmp)
	if out, err := inst.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, Tail(string(out), 2000))
	}
	host, port, err := o.address()
	if err != nil {
		return nil, err
	}
	m := &MariaDB{Addr: net.JoinHostPort(host, strconv.Itoa(port)), LogPath: filepath.Join(dir, "mariadbd.log"), DataDir: data,
		exited: make(chan struct{})}
	log, err := os.Create(m.LogPath)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--user=root",
		"--bind-address=" + host, "--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "mariadbd.sock"),
		"--pid-file=" + filepath.Join(dir, "mariadbd.pid")}, append(tuning, o.settings()...)...)
	m.cmd = o.command(server, args...)
	m.cmd.Stdout, m.cmd.Stderr = log, log
	if err := m.cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("mariadbd: %w", err)
	}
	go func() { _ = m.cmd.Wait(); log.Close(); close(m.exited) }()
	ready := o.Ready
	if ready == nil {
		ready = func(ctx context.Context, m *MariaDB) error { return m.ping(ctx) }
	}
	if err := m.await(ctx, ready); err != nil {
		m.Stop()
		b, _ := os.ReadFile(m.LogPath)
		return nil, fmt.Errorf("private MariaDB: %w\n%s", err, Tail(string(b), 2000))
	}
	return m, nil
}

func mariadbBinaries() (server, install string, err error) {
	server = os.Getenv("IDEMGATE_TEST_MARIADBD")
	if server == "" {
		if server, err = exec.LookPath("mariadbd"); err != nil {
			server = "/usr/sbin/mariadbd" // often off a user's PATH
		}
	}
	if _, err := os.Stat(server); err != nil {
		return "", "", fmt.Errorf("%w: %w", ErrNoMariaDB, err)
	}
	install = filepath.Join(filepath.Dir(server), "mariadb-install-db")
	if _, err := os.Stat(install); err != nil {
		if install, err = exec.LookPath("mariadb-install-db"); err != nil {
			return "", "", fmt.Errorf("%w: %w", ErrNoMariaDB, err)
		}
	}
	return server, install, nil
}

// DSN is the go-sql-driver DSN of database db ("": none) as root.
func (m *MariaDB) DSN(db string) string {
	return (&mysql.Config{User: "root", Net: "tcp", Addr: m.Addr, DBName: db, AllowNativePasswords: true}).FormatDSN()
}

// ping opens a connection to the server and pings it.
func (m *MariaDB) ping(ctx context.Context) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	return db.PingContext(ctx)
}

// Socket is the server's Unix socket (reachable from any network
// namespace: it is a path).
func (m *MariaDB) Socket() string { return filepath.Join(filepath.Dir(m.LogPath), "mariadbd.sock") }

// Pid is the server's process id.
func (m *MariaDB) Pid() int { return m.cmd.Process.Pid }

// await asks ready until the server answers (20 s at most).
func (m *MariaDB) await(ctx context.Context, ready func(context.Context, *MariaDB) error) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, cancel := context.WithTimeout(ctx, time.Second)
		err := ready(c, m)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-m.exited:
			return errors.New("mariadbd exited at start")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within 20 s: %w", err)
		}
	}
}

// Stop shuts the server down (SIGTERM; SIGKILL after 20 s). Nil-safe.
func (m *MariaDB) Stop() { m.StopWithin(20 * time.Second) }

// StopWithin shuts the server down: SIGTERM, SIGKILL after grace
// (Terminate: bounded, whatever state the server is in); it reports whether
// the server exited. Nil-safe.
func (m *MariaDB) StopWithin(grace time.Duration) bool {
	if m == nil {
		return true
	}
	return Terminate(m.cmd.Process, m.exited, grace)
}
