package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// PrivateMariaDB starts a MariaDB server of the test's own and returns the
// DSN of an empty database on it: mariadb-install-db into a temporary
// directory, then mariadbd on a free loopback port, stopped when the test
// ends. It is for tests that read the server's GLOBAL counters (SHOW GLOBAL
// STATUS), which every client of the shared server moves, a database of its
// own notwithstanding. Durability settings are the defaults the shared
// server runs with (innodb_flush_log_at_trx_commit=1, no binary log); the
// buffer pool and redo log are small. Without the binaries
// (IDEMGATE_TEST_MARIADBD names mariadbd; mariadb-install-db is looked for
// beside it and on PATH) the test skips, and fails under CI=true.
func PrivateMariaDB(t testing.TB) string {
	t.Helper()
	server, install, err := mariadbBinaries()
	if err != nil {
		unavailable(t, "a private MariaDB server", err)
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	tuning := []string{"--innodb-buffer-pool-size=64M", "--innodb-log-file-size=16M"}
	inst := exec.Command(install, append([]string{"--no-defaults", "--datadir=" + data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db"}, tuning...)...)
	if out, err := inst.CombinedOutput(); err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, proc.Tail(string(out), 2000))
	}
	port, err := proc.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	srv := exec.Command(server, append([]string{"--no-defaults", "--datadir=" + data, "--user=root",
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--socket=" + filepath.Join(dir, "sock"),
		"--pid-file=" + filepath.Join(dir, "pid"), "--skip-log-bin"}, tuning...)...)
	srv.Stdout, srv.Stderr = log, log
	if err := srv.Start(); err != nil {
		log.Close()
		t.Fatalf("mariadbd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); log.Close(); close(exited) }()
	t.Cleanup(func() { stopServer(srv, exited) })
	dsn := (&mysql.Config{User: "root", Net: "tcp", Addr: fmt.Sprintf("127.0.0.1:%d", port), DBName: "idemgate_private",
		AllowNativePasswords: true, ParseTime: true}).FormatDSN()
	if err := awaitServer(dsn, exited); err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		t.Fatalf("private MariaDB: %v\n%s", err, proc.Tail(string(b), 2000))
	}
	return dsn
}

// mariadbBinaries finds mariadbd (often in /usr/sbin, off a user's PATH)
// and mariadb-install-db.
func mariadbBinaries() (server, install string, err error) {
	server = os.Getenv("IDEMGATE_TEST_MARIADBD")
	if server == "" {
		if server, err = exec.LookPath("mariadbd"); err != nil {
			server = "/usr/sbin/mariadbd"
		}
	}
	if _, err := os.Stat(server); err != nil {
		return "", "", fmt.Errorf("mariadbd: %w", err)
	}
	install = filepath.Join(filepath.Dir(server), "mariadb-install-db")
	if _, err := os.Stat(install); err != nil {
		if install, err = exec.LookPath("mariadb-install-db"); err != nil {
			return "", "", err
		}
	}
	return server, install, nil
}

// awaitServer pings until the server answers (20 s at most), then creates
// the DSN's database.
func awaitServer(dsn string, exited <-chan struct{}) error {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return err
	}
	name := cfg.DBName
	cfg.DBName = ""
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			_, err = db.Exec("CREATE DATABASE `" + name + "`")
			return err
		}
		select {
		case <-exited:
			return errors.New("mariadbd exited at start")
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within 20 s: %w", err)
		}
	}
}

// stopServer asks mariadbd to shut down and kills it after 20 s.
func stopServer(srv *exec.Cmd, exited <-chan struct{}) {
	_ = srv.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		_ = srv.Process.Kill()
		<-exited
	}
}
