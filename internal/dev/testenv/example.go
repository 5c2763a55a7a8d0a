package testenv

import (
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// ExampleMySQL creates a database of its own for code that has no
// testing.TB (a runnable example) and returns its DSN and the function that
// drops it. It is named like the run databases, so a killed run's leftover
// is reaped by a later run. There is no skipping an example: without the
// server it fails.
func ExampleMySQL() (dsn string, drop func(), err error) {
	cfg, err := baseDSN()
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("%s%s%d_x%s", cfg.DBName, runPrefix, time.Now().Unix(), proc.Nonce()[:12])
	admin := *cfg
	admin.DBName = ""
	admin.Timeout = 2 * time.Second
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		return "", nil, err
	}
	if _, err := db.Exec("CREATE DATABASE `" + name + "`"); err != nil {
		db.Close()
		return "", nil, fmt.Errorf("MariaDB/MySQL for the example: %w", err)
	}
	c := *cfg
	c.DBName = name
	return c.FormatDSN(), func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		db.Close()
	}, nil
}

// ExampleRedis is RedisPrefix for a runnable example: the test Redis (as
// RedisURL finds it) and a key prefix of its own, with the function that
// deletes every key under it.
func ExampleRedis() (url, prefix string, clean func(), err error) {
	url = os.Getenv("IDEMGATE_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/15"
	}
	prefix = RedisKeyPrefix + proc.Nonce()[:12] + ":"
	if _, err := CountRedisKeys(url, prefix); err != nil {
		return "", "", nil, fmt.Errorf("Redis for the example: %w", err)
	}
	return url, prefix, func() { _, _ = DeleteRedisKeys(url, prefix) }, nil
}
