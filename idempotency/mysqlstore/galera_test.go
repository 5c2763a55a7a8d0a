package mysqlstore_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency"
	idem "github.com/idemgate/idemgate/idempotency/driver"
	"github.com/idemgate/idemgate/idempotency/idemtest"
	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// spread is a connector whose every new connection goes to the next node:
// the pool holds connections to all of them, so that consecutive
// statements of one task, and the 64 claims of a race, land on different
// nodes (writes on every node, as a multi-writer cluster takes them).
type spread struct {
	nodes []driver.Connector
	next  atomic.Uint64
}

func (s *spread) Connect(ctx context.Context) (driver.Conn, error) {
	return s.nodes[(s.next.Add(1)-1)%uint64(len(s.nodes))].Connect(ctx)
}

func (s *spread) Driver() driver.Driver { return s.nodes[0].Driver() }

// spreadStore is a store whose pool spreads its connections over dsns.
func spreadStore(t *testing.T, dsns []string) *mysqlstore.Store {
	t.Helper()
	sp := &spread{}
	for _, dsn := range dsns {
		sp.nodes = append(sp.nodes, connector(t, dsn))
	}
	return storeOn(t, sp)
}

// connector connects to dsn with the settings mysqlstore.Open forces.
func connector(t *testing.T, dsn string) driver.Connector {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ParseTime, cfg.Loc, cfg.ClientFoundRows, cfg.InterpolateParams = true, time.UTC, true, true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = 3*time.Second, 10*time.Second, 10*time.Second
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// storeOn is a store on a pool of c (mysqlstore.New checks its settings),
// closed when the test ends.
func storeOn(t *testing.T, c driver.Connector) *mysqlstore.Store {
	t.Helper()
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(32)
	db.SetMaxIdleConns(32)
	t.Cleanup(func() { db.Close() })
	s, err := mysqlstore.New(db, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The store conformance suite, the 64-way race among it, on a three-node
// Galera cluster with the store's connections spread over all nodes: a
// claim's insert and its completion may be certified on different nodes,
// and conflicting writes surface as error 1213 at COMMIT (the nodes do not
// retry autocommit statements themselves here: wsrep_retry_autocommit=0).
func TestConformanceGalera(t *testing.T) {
	g := testenv.Galera(t, 3, "idemgate_galera", proc.GaleraOptions{})
	s := spreadStore(t, g.DSNs("idemgate_galera"))
	if _, err := s.Migrate(context.Background()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	idemtest.Run(t, idemtest.StoreOnly(s))
	// The figures of docs/operations.md: what the nodes failed at
	// certification (or aborted for a write set of another node) and what
	// the store ran again.
	ctx := context.Background()
	t.Logf("Galera: certification failures by node %v, brute-force aborts by node %v; aborts the store retried: %d",
		g.Status(ctx, "wsrep_local_cert_failures"), g.Status(ctx, "wsrep_local_bf_aborts"), s.AbortsRetried())
	t.Run("QuorumLostIsRetryable", func(t *testing.T) { quorumLost(t, g) })
}

// quorumLost kills two of the three nodes: the last one leaves the primary
// component and refuses every statement with 1047, which a claim on it must
// answer as a retryable store failure (FC delivers again later, by when a
// node is back), naming the cause, with nothing recorded.
func quorumLost(t *testing.T, g *proc.Galera) {
	one, err := mysqlstore.Open(g.DSNs("idemgate_galera")[0], mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { one.Close() })
	eng := idempotency.New(one, idempotency.WithLogger(idemtest.TestLogger(t)))
	ctx := context.Background()
	g.KillNode(1)
	g.KillNode(2)
	// Until node 0 notices (evs.suspect_timeout), its writes wait or fail
	// otherwise; once it is alone, every claim is refused with 1047.
	var claimErr error
	for i := 0; i < 20 && !errors.Is(claimErr, mysqlstore.ErrNodeNotReady); i++ {
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, _, claimErr = eng.Claim(c, idempotency.ClaimRequest{Key: idemtest.NewKey(), Owner: "o", PayloadHash: "ph"})
		cancel()
		if claimErr == nil {
			time.Sleep(250 * time.Millisecond)
		}
	}
	if !errors.Is(claimErr, mysqlstore.ErrNodeNotReady) {
		t.Fatalf("a claim on the node left alone: %v, want ErrNodeNotReady", claimErr)
	}
	if class, code := idempotency.Classify(claimErr); class != idempotency.ClassRetryable || code != "store_unavailable" {
		t.Fatalf("classified %s %s, want RETRYABLE store_unavailable: %v", class, code, claimErr)
	}
	t.Logf("the claim's answer: %v", claimErr)
}

// A COMMIT that a Galera node refuses with 1047 (wsrep_reject_queries=ALL
// while an operator drains it; likewise a node outside the primary
// component) neither commits nor rolls back: the transaction stays open on
// its connection. The store must not use that connection again: the next
// claim's writes would land in the open transaction, be answered as
// successes, and vanish with it (or commit the refused takeover).
func TestGaleraRefusedCommit(t *testing.T) {
	g := testenv.Galera(t, 1, "idemgate_galera", proc.GaleraOptions{})
	dsn := g.DSNs("idemgate_galera")[0]
	plain, err := mysqlstore.Open(dsn, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { plain.Close() })
	ctx := context.Background()
	if _, err := plain.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	a := &aborter{Connector: connector(t, dsn)}
	db := sql.OpenDB(a)
	db.SetMaxOpenConns(1) // the next claim gets the refused commit's connection, if it is kept
	t.Cleanup(func() { db.Close() })
	s, err := mysqlstore.New(db, mysqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := idemtest.NewKey(), idemtest.NewKey()
	if _, err := plain.Claim(ctx, idem.ClaimRequest{Key: k1, Owner: "first", PayloadHash: "ph", Lease: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond) // k1's lease runs out: the next claim is a takeover, in a transaction
	a.commit = func(commit func() error) error {
		if _, err := plain.DB().ExecContext(ctx, "SET GLOBAL wsrep_reject_queries = ALL"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := plain.DB().ExecContext(ctx, "SET GLOBAL wsrep_reject_queries = NONE"); err != nil {
				t.Fatal(err)
			}
		}()
		return commit()
	}
	if _, err := s.Claim(ctx, idem.ClaimRequest{Key: k1, Owner: "second", PayloadHash: "ph", Lease: time.Minute}); !errors.Is(err, mysqlstore.ErrNodeNotReady) {
		t.Fatalf("a takeover whose COMMIT is refused: %v, want ErrNodeNotReady", err)
	}
	res, err := s.Claim(ctx, idem.ClaimRequest{Key: k2, Owner: "o", PayloadHash: "ph", Lease: time.Minute})
	if err != nil || res.Decision != idem.DecisionFirst {
		t.Fatalf("claim of k2: %+v %v", res.Decision, err)
	}
	if err := s.Complete(ctx, k2, res.Record.Fence, idem.Completion{ResultRef: "ref"}); err != nil {
		t.Fatal(err)
	}
	if r, err := plain.Get(ctx, k2); err != nil || r.Status != idem.StatusSucceeded {
		t.Fatalf("k2 on another connection: %s %v, want SUCCEEDED (the claim and completion answered nil)", r.Status, err)
	}
	if r, err := plain.Get(ctx, k1); err != nil || r.LeaseOwner != "first" || r.Fence != 1 {
		t.Fatalf("k1: owner %s fence %d %v, want the refused takeover not recorded", r.LeaseOwner, r.Fence, err)
	}
}
