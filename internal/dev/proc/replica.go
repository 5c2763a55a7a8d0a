package proc

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// ServerOptions are the replication settings of a private server
// (StartMariaDBWith); the zero value is StartMariaDB's server.
type ServerOptions struct {
	// ServerID > 0 turns the binary log on (ROW, log_slave_updates, GTID
	// strict mode), so that the server can be a primary or a replica.
	ServerID int
	// SemiSyncPrimary makes the server wait, AFTER_SYNC, for a replica's
	// acknowledgement of each commit before it answers, for SemiSyncTimeout
	// (default 60 s) before it falls back to asynchronous replication.
	// SemiSyncReplica makes it acknowledge as a replica. (A replica with the
	// primary side on would wait for replicas of its own as it applies.)
	SemiSyncPrimary, SemiSyncReplica bool
	SemiSyncTimeout                  time.Duration
}

func (o ServerOptions) settings() []string {
	if o.ServerID <= 0 {
		return []string{"--skip-log-bin"}
	}
	s := []string{"--server-id=" + strconv.Itoa(o.ServerID), "--log-bin=mariadb-bin", "--binlog-format=ROW",
		"--log-slave-updates", "--gtid-strict-mode=ON", "--skip-slave-start", "--relay-log=relay-bin"}
	if o.SemiSyncPrimary {
		timeout := o.SemiSyncTimeout
		if timeout <= 0 {
			timeout = time.Minute
		}
		s = append(s, "--rpl-semi-sync-master-enabled=ON", "--rpl-semi-sync-master-wait-point=AFTER_SYNC",
			"--rpl-semi-sync-master-timeout="+strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	if o.SemiSyncReplica {
		s = append(s, "--rpl-semi-sync-slave-enabled=ON")
	}
	return s
}

// Kill ends the server with SIGKILL (a crash: nothing flushed, no goodbye
// to its clients or replicas) and waits for it. Nil-safe.
func (m *MariaDB) Kill() {
	if m == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	<-m.exited
}

// Exec runs statements on the server as root, outside any database.
func (m *MariaDB) Exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("MariaDB at %s: %s: %w", m.Addr, s, err)
		}
	}
	return nil
}

// Replicate makes m a read-only GTID replica of the server at primary
// (host:port, as root) from that server's first transaction, and waits until
// its replication threads run.
func (m *MariaDB) Replicate(ctx context.Context, primary string) error {
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return err
	}
	if err := m.Exec(ctx, "SET GLOBAL read_only = 1",
		fmt.Sprintf("CHANGE MASTER TO MASTER_HOST = '%s', MASTER_PORT = %s, MASTER_USER = 'root', MASTER_PASSWORD = '', "+
			"MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1", host, port),
		"START SLAVE"); err != nil {
		return err
	}
	return m.awaitStatus(ctx, 20*time.Second, func(st map[string]string) (bool, error) {
		if st["Last_IO_Error"] != "" || st["Last_SQL_Error"] != "" {
			return false, fmt.Errorf("replication: %s%s", st["Last_IO_Error"], st["Last_SQL_Error"])
		}
		return st["Slave_IO_Running"] == "Yes" && st["Slave_SQL_Running"] == "Yes", nil
	})
}

// Promote makes the replica m a primary, as a failover does: the I/O thread
// stops (nothing more arrives from the old primary), the SQL thread applies
// everything already received (within 30 s), then replication is reset and
// the server made writable. It returns the GTID position the new primary
// starts from.
func (m *MariaDB) Promote(ctx context.Context) (string, error) {
	if err := m.Exec(ctx, "STOP SLAVE IO_THREAD"); err != nil {
		return "", err
	}
	err := m.awaitStatus(ctx, 30*time.Second, func(st map[string]string) (bool, error) {
		if st["Last_SQL_Error"] != "" {
			return false, fmt.Errorf("replica SQL thread: %s", st["Last_SQL_Error"])
		}
		return st["Relay_Master_Log_File"] == st["Master_Log_File"] && st["Exec_Master_Log_Pos"] == st["Read_Master_Log_Pos"], nil
	})
	if err != nil {
		return "", fmt.Errorf("promote: the relay log was not applied: %w", err)
	}
	if err := m.Exec(ctx, "STOP SLAVE", "RESET SLAVE ALL", "SET GLOBAL read_only = 0"); err != nil {
		return "", err
	}
	return m.Variable(ctx, "SELECT @@gtid_current_pos")
}

// Variable reads one value (a SELECT of one column, or the value column of
// a SHOW … LIKE of one row).
func (m *MariaDB) Variable(ctx context.Context, query string) (string, error) {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return "", err
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, query)
	if err != nil {
		return "", fmt.Errorf("MariaDB at %s: %s: %w", m.Addr, query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	if !rows.Next() {
		return "", fmt.Errorf("MariaDB at %s: %s: no row", m.Addr, query)
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return "", err
	}
	return vals[len(vals)-1].String, rows.Err()
}

// slaveStatus is SHOW SLAVE STATUS as column → value (empty: not a replica).
func (m *MariaDB) slaveStatus(ctx context.Context, db *sql.DB) (map[string]string, error) {
	rows, err := db.QueryContext(ctx, "SHOW SLAVE STATUS")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	st := map[string]string{}
	if !rows.Next() {
		return st, rows.Err()
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if err := rows.Scan(ptrs...); err != nil {
		return nil, err
	}
	for i, c := range cols {
		st[c] = vals[i].String
	}
	return st, rows.Err()
}

// awaitStatus polls SHOW SLAVE STATUS until done says so, errs, or within
// passes.
func (m *MariaDB) awaitStatus(ctx context.Context, within time.Duration, done func(map[string]string) (bool, error)) error {
	db, err := sql.Open("mysql", m.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(within)
	for {
		st, err := m.slaveStatus(ctx, db)
		if err != nil {
			return err
		}
		ok, err := done(st)
		if err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replica status not reached within %s: %s", within, statusLine(st))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// statusLine is the part of SHOW SLAVE STATUS an error names.
func statusLine(st map[string]string) string {
	var b []byte
	for _, k := range []string{"Slave_IO_Running", "Slave_SQL_Running", "Master_Log_File", "Read_Master_Log_Pos",
		"Relay_Master_Log_File", "Exec_Master_Log_Pos", "Gtid_IO_Pos", "Slave_SQL_Running_State", "Last_IO_Error", "Last_SQL_Error"} {
		b = fmt.Appendf(b, "%s=%q ", k, st[k])
	}
	return string(b)
}

// BinlogGTIDs is the number of transactions in the server's binary log
// (its GTID events, read with mariadb-binlog from the data directory): of
// a killed server, what it had committed.
func (m *MariaDB) BinlogGTIDs(ctx context.Context) (int, error) {
	files, err := filepath.Glob(filepath.Join(m.DataDir, "mariadb-bin.[0-9]*"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no binary log in %s (%v)", m.DataDir, err)
	}
	tool, err := exec.LookPath("mariadb-binlog")
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrNoMariaDB, err)
	}
	out, err := exec.CommandContext(ctx, tool, append([]string{"--no-defaults"}, files...)...).Output()
	if err != nil {
		return 0, fmt.Errorf("mariadb-binlog: %w", err)
	}
	return len(gtidEvent.FindAll(out, -1)), nil
}

// gtidEvent is the line mariadb-binlog prints for a transaction's GTID
// event ("#… GTID 0-1-42 trans").
var gtidEvent = regexp.MustCompile(`(?m)\sGTID \d+-\d+-\d+`)
