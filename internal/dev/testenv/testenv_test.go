package testenv

import (
	"context"
	"database/sql"
	"strconv"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"

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

// A test's Redis keys (RedisPrefix) go when it ends, also those without a
// TTL; another run's keys, under another prefix, stay.
func TestNoRedisKeyOutlivesTheTest(t *testing.T) {
	url := RedisURL(t)
	other := RedisPrefix(t) // another run's, still live
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, other+"k", "v", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	var prefix string
	t.Run("a test", func(t *testing.T) {
		prefix = RedisPrefix(t)
		for i := range 1500 { // more than one SCAN page
			if err := c.Set(ctx, prefix+strconv.Itoa(i), "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	})
	if n, err := CountRedisKeys(url, prefix); err != nil || n != 0 {
		t.Errorf("%d keys under %s outlived their test (%v)", n, prefix, err)
	}
	if n, err := c.Exists(ctx, other+"k").Result(); err != nil || n != 1 {
		t.Errorf("another prefix's key was deleted (%d, %v)", n, err)
	}
	if _, err := DeleteRedisKeys(url, "idemgate-test:*"); err == nil {
		t.Error("a pattern was accepted as a prefix")
	}
}
