package handler_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/handler"
	"github.com/idemgate/idemgate/idempotency"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// statementCounter relays MySQL connections and counts the statements
// clients send: COM_QUERY packets (the store interpolates its parameters, so
// each statement is one), which start a command (sequence id 0).
type statementCounter struct {
	ln     net.Listener
	target string
	n      atomic.Int64
}

func newStatementCounter(t *testing.T, target string) *statementCounter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &statementCounter{ln: ln, target: target}
	t.Cleanup(func() { ln.Close() })
	go c.accept()
	return c
}

func (c *statementCounter) accept() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		go c.relay(conn)
	}
}

func (c *statementCounter) relay(client net.Conn) {
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		client.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(client, server); client.Close() })
	wg.Go(func() { c.count(client, server); server.Close() })
	wg.Wait()
}

// count copies client packets to server, counting COM_QUERY commands.
func (c *statementCounter) count(client, server net.Conn) {
	head := make([]byte, 4)
	for {
		if _, err := io.ReadFull(client, head); err != nil {
			return
		}
		n := int(binary.LittleEndian.Uint32(append(head[:3:3], 0)))
		body := make([]byte, n)
		if _, err := io.ReadFull(client, body); err != nil {
			return
		}
		if head[3] == 0 && n > 0 && body[0] == 0x03 {
			c.n.Add(1)
		}
		if _, err := server.Write(append(head, body...)); err != nil {
			return
		}
	}
}

// The statements a first delivery sends to MySQL (without Redis): the
// claim's INSERT and the fenced completing UPDATE, which also leaves the
// finish pending; a notify's finish is recorded at once (one more), a
// publish-only finish in one batch write for all; each step that another
// follows is checkpointed (one more). A change that adds a statement to the
// first delivery fails here.
func TestStatementsPerFirstDelivery(t *testing.T) {
	dsn := testenv.FreshMySQLDSN(t)
	testenv.MigrateMySQL(t, dsn)
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	counter := newStatementCounter(t, cfg.Addr)
	cfg.Addr = counter.ln.Addr().String()
	store, err := mysqlstore.Open(cfg.FormatDSN(), mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	const tasks = 10
	cases := []struct {
		name     string
		taskType string
		input    map[string]any
		notify   bool
		perTask  int64
		batched  int64 // batch writes for all the tasks
	}{
		{"one step, no notify", "summarize", map[string]any{"content": "c"}, false, 2, 1},
		{"one step, notify", "summarize", map[string]any{"content": "c"}, true, 3, 0},
		{"two steps, no notify", "keywords", map[string]any{"text": "alpha beta gamma alpha"}, false, 3, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rg := newRigOn(t, store, t.TempDir(), &model{}, idempotency.WithFinishBatch(time.Hour, 1000))
			rg.p.Notify = &notifier{}
			if err := store.Ping(context.Background()); err != nil { // the pool's connection is open
				t.Fatal(err)
			}
			before := counter.n.Load()
			keysOf := make([]string, tasks)
			for i := range tasks {
				keysOf[i] = fmt.Sprintf("%s-%d-%d", c.name, i, time.Now().UnixNano())
				data := map[string]any{"tenant_id": "t1", "task_type": c.taskType, "operation": c.taskType,
					"input": c.input, "idempotency_key": keysOf[i]}
				url := ""
				if c.notify {
					url = "https://hook.test/x"
				}
				if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev", data, url), handler.Meta{RequestID: fmt.Sprint(i)})); o.Status != "SUCCEEDED" {
					t.Fatalf("task %d: %+v", i, o)
				}
			}
			if err := rg.p.Engine.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, want := counter.n.Load()-before, c.perTask*tasks+c.batched
			if got != want {
				t.Fatalf("%d statements for %d first deliveries, want %d (%d each + %d batched)", got, tasks, want, c.perTask, c.batched)
			}
			// A duplicate the store answers: the INSERT that meets the key,
			// and the plain read that decides (no transaction).
			before = counter.n.Load()
			for i := range tasks {
				data := map[string]any{"tenant_id": "t1", "task_type": c.taskType, "operation": c.taskType,
					"input": c.input, "idempotency_key": keysOf[i]}
				if o := outcome(t, rg.p.Handle(context.Background(), taskBody("ev", data, ""), handler.Meta{RequestID: "dup"})); o.Decision != "REPEAT_DONE" {
					t.Fatalf("duplicate %d: %+v", i, o)
				}
			}
			if got := counter.n.Load() - before; got != 2*tasks {
				t.Fatalf("%d statements for %d duplicates, want 2 each", got, tasks)
			}
		})
	}
}
