package testenv

import (
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// What a test makes on the server goes when the test ends: its database
// (MySQLDSN, FreshMySQLDSN) and its account (MySQLAccount), and the account
// works until then with the password it was given, on that database only.
func TestNothingOutlivesTheTest(t *testing.T) {
	var dbName, user string
	t.Run("a test", func(t *testing.T) {
		dsn := MySQLAccount(t, MySQLDSN(t), "pw-"+proc.Nonce()[:8])
		cfg, err := mysql.ParseDSN(dsn)
		if err != nil {
			t.Fatal(err)
		}
		dbName, user = cfg.DBName, cfg.User
		db, err := sql.Open("mysql", dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.Exec("CREATE TABLE t (id INT)"); err != nil {
			t.Fatalf("the account cannot use its database: %v", err)
		}
		if _, err := db.Exec("CREATE DATABASE " + dbName + "_other"); err == nil {
			t.Fatal("the account may create databases: it has more than its own")
		}
	})
	base, err := checkServer()
	if err != nil {
		t.Fatal(err)
	}
	admin := *base
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", dbName).Scan(&n); err != nil || n != 0 {
		t.Errorf("database %s outlived its test (%d, %v)", dbName, n, err)
	}
	if err := db.QueryRow("SELECT COUNT(*) FROM mysql.user WHERE user = ?", user).Scan(&n); err != nil || n != 0 {
		t.Errorf("account %s outlived its test (%d, %v)", user, n, err)
	}
}
