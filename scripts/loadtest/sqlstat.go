package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// MySQL statements per task are read from the server's GLOBAL counters
// (SHOW GLOBAL STATUS) before and after every slice of a phase. The phases of
// a group run one at a time, so a slice's deltas are that phase's alone, the
// floors' statements included only in the floors' slices. GLOBAL counters
// count every client of the server, and a database of our own does not
// isolate them; so each slice also compares snapshots of the process list,
// and a slice in which a connection outside the load test's database ran a
// statement (or came and went) is not "clean" and is left out of the
// per-task figures. What the check cannot see: another client using the same
// database, and InnoDB's background work (page flushing, purge), which
// reaches the log and fsync counters but no Com_ counter.

// Status variables read around each slice: statementVars and four more.
// MariaDB 10.11 has no Innodb_os_log_fsyncs (gone with the 10.8 redo log);
// with innodb_flush_log_at_trx_commit=1 each Innodb_log_writes is followed
// by a flush, and Innodb_data_fsyncs counts every InnoDB fsync, the log's
// included.
var statusVars = append(slices.Clone(statementVars), "Questions", "Connections", "Innodb_log_writes", "Innodb_data_fsyncs")

// statementVars are summed to a slice's "statements": every data statement
// and every transaction-control statement, each a round trip to the server.
var statementVars = []string{"Com_insert", "Com_insert_select", "Com_replace", "Com_replace_select", "Com_update",
	"Com_update_multi", "Com_delete", "Com_delete_multi", "Com_select", "Com_begin", "Com_commit", "Com_rollback"}

// Counters are status variables by name (or their deltas).
type Counters map[string]int64

// Statements is the sum of statementVars.
func (c Counters) Statements() int64 {
	var n int64
	for _, v := range statementVars {
		n += c[v]
	}
	return n
}

// Others are the client statements of one slice outside statementVars (SET,
// SHOW, DO, …): Questions counts every statement a client sent, the closing
// SHOW STATUS of the probe included (it counts itself), hence the 1.
func (c Counters) Others() int64 { return c["Questions"] - 1 - c.Statements() }

// conn is one process-list entry.
type conn struct {
	db      string
	queryID int64
	busy    bool // running a statement
}

// sqlProbe reads the counters on a connection of its own, so that its own
// statements can be told apart.
type sqlProbe struct {
	db     *sql.DB
	c      *sql.Conn
	self   int64
	dbName string // the load test's database: its connections are ours
	before Counters
	procs  map[int64]conn
}

func openProbe(ctx context.Context, dsn string) (*sqlProbe, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("probe: %w", err)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	p := &sqlProbe{db: db, dbName: cfg.DBName}
	if p.c, err = db.Conn(ctx); err == nil {
		err = p.c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&p.self)
	}
	if err != nil {
		p.Close()
		return nil, fmt.Errorf("probe: %w", err)
	}
	return p, nil
}

// Close releases the connection (nil-safe).
func (p *sqlProbe) Close() {
	if p == nil {
		return
	}
	if p.c != nil {
		p.c.Close()
	}
	p.db.Close()
}

// begin snapshots the process list, then the counters (so the snapshot's
// own SELECT is not in the delta).
func (p *sqlProbe) begin(ctx context.Context) error {
	var err error
	if p.procs, err = p.processList(ctx); err != nil {
		return err
	}
	p.before, err = p.status(ctx)
	return err
}

// end reads the counters, then the process list, and returns the deltas
// since begin and, when another client may have been active, why.
func (p *sqlProbe) end(ctx context.Context) (Counters, string, error) {
	after, err := p.status(ctx)
	if err != nil {
		return nil, "", err
	}
	procs, err := p.processList(ctx)
	if err != nil {
		return nil, "", err
	}
	d := Counters{}
	for k, v := range after {
		d[k] = v - p.before[k]
	}
	return d, p.foreign(p.procs, procs, d["Connections"]), nil
}

func (p *sqlProbe) status(ctx context.Context) (Counters, error) {
	q := "SHOW GLOBAL STATUS WHERE Variable_name IN ('" + strings.Join(statusVars, "','") + "')"
	rows, err := p.c.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("SHOW GLOBAL STATUS: %w", err)
	}
	defer rows.Close()
	c := Counters{}
	for rows.Next() {
		var name string
		var v int64
		if err := rows.Scan(&name, &v); err != nil {
			return nil, err
		}
		c[name] = v
	}
	return c, rows.Err()
}

func (p *sqlProbe) processList(ctx context.Context) (map[int64]conn, error) {
	rows, err := p.c.QueryContext(ctx, `SELECT ID, COALESCE(DB, ''), COMMAND, QUERY_ID FROM information_schema.PROCESSLIST
 WHERE COMMAND <> 'Daemon'`)
	if err != nil {
		return nil, fmt.Errorf("process list: %w", err)
	}
	defer rows.Close()
	m := map[int64]conn{}
	for rows.Next() {
		var id, qid int64
		var db, cmd string
		if err := rows.Scan(&id, &db, &cmd, &qid); err != nil {
			return nil, err
		}
		m[id] = conn{db: db, queryID: qid, busy: cmd != "Sleep"}
	}
	return m, rows.Err()
}

// foreign says why a slice may hold another client's statements ("" if
// none was seen): a connection outside our database that is new, ran a
// statement, was running one, or closed; or more connections were opened
// than the second snapshot shows (one came and went between them).
func (p *sqlProbe) foreign(before, after map[int64]conn, opened int64) string {
	var seenNew int64
	for id, a := range after {
		b, existed := before[id]
		if !existed {
			seenNew++
		}
		switch {
		case id == p.self || a.db == p.dbName:
		case !existed:
			return fmt.Sprintf("connection %d (database %q) opened", id, a.db)
		case a.queryID != b.queryID || a.busy:
			return fmt.Sprintf("connection %d (database %q) ran a statement", id, a.db)
		}
	}
	for id, b := range before {
		if _, ok := after[id]; !ok && b.db != p.dbName {
			return fmt.Sprintf("connection %d (database %q) closed", id, b.db)
		}
	}
	if opened > seenNew {
		return fmt.Sprintf("%d connection(s) opened and closed during the slice", opened-seenNew)
	}
	return ""
}
