package testenv

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/proc"
)

// MySQLAccount creates an account of the test's own, named idemgate_t<random>
// and identified by password, with every privilege on the database dsn names
// and nothing else, and returns dsn as that account. The account is dropped
// when the test ends: no account outlives its run, and two runs never share
// one (a fixed name with a fixed password stayed on the server for good).
func MySQLAccount(t testing.TB, dsn, password string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	admin := *cfg
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	user := "idemgate_t" + proc.Nonce()[:12] // MySQL allows 32 characters
	hosts := []string{"127.0.0.1", "localhost"}
	t.Cleanup(func() {
		for _, h := range hosts {
			_, _ = db.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%s'", user, h))
		}
		db.Close()
	})
	if strings.ContainsAny(password, `'\`) {
		t.Fatal("MySQLAccount: a test password without quotes or backslashes, please")
	}
	for _, h := range hosts {
		for _, q := range []string{fmt.Sprintf("CREATE USER '%s'@'%s' IDENTIFIED BY '%s'", user, h, password),
			fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%s'", cfg.DBName, user, h)} {
			if _, err := db.Exec(q); err != nil {
				t.Fatalf("%s: %v", strings.ReplaceAll(q, password, "…"), err)
			}
		}
	}
	cfg.User, cfg.Passwd = user, password
	return cfg.FormatDSN()
}
