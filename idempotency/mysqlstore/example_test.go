package mysqlstore_test

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/idempotency/mysqlstore"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// ownPool is the store on a pool of the caller's own, under table names of
// its own (docs/library.md quotes it).
func ownPool(ctx context.Context, dsn string) (*mysqlstore.Store, *sql.DB, error) {
	db, err := sql.Open("mysql", dsn) // dsn: app:…@tcp(rds:3306)/app?parseTime=true&loc=UTC&clientFoundRows=true&time_zone=%27%2B00%3A00%27
	if err != nil {
		return nil, nil, err
	}
	store, err := mysqlstore.New(db, mysqlstore.Options{Tables: mysqlstore.Tables{Record: "billing_idem", Replay: "billing_idem_audit",
		Stats: "billing_idem_stats", Migrations: "billing_idem_versions"}}) // empty fields: the defaults
	if err != nil {
		return nil, db, err
	}
	_, err = store.Migrate(ctx) // creates the tables under those names
	return store, db, err
}

// Your own pool, your table names (the test MariaDB, as CI=true runs have).
func ExampleNew() {
	base, drop, err := testenv.ExampleMySQL()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer drop()
	cfg, _ := mysql.ParseDSN(base)
	cfg.ParseTime, cfg.Loc, cfg.ClientFoundRows = true, time.UTC, true
	cfg.Params = map[string]string{"time_zone": "'+00:00'"}
	store, db, err := ownPool(context.Background(), cfg.FormatDSN())
	if db != nil {
		defer db.Close() // Close leaves the pool to its owner
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	var n int
	err = db.QueryRow(`SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name LIKE 'billing\_idem%'`).Scan(&n)
	fmt.Println(n, "tables", err)
	// Output:
	// 4 tables <nil>
}
