package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/idemgate/idemgate/internal/dev/proc"
	"github.com/idemgate/idemgate/internal/dev/testenv"
)

// TestMain makes the test binary a stand-in function whose /initialize
// fails, when COLDSTART_HELPER is set (see failingBinary).
func TestMain(m *testing.M) {
	if os.Getenv("COLDSTART_HELPER") == "fail" {
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Getenv("FC_SERVER_PORT"))
		if err != nil {
			os.Exit(1)
		}
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"errorType":"initialize_failed","errorMessage":"store_unavailable: Unknown database"}`)
		}))
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// runQuiet runs the command with args; stdout and stderr go to files the
// test returns.
func runQuiet(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	dir := t.TempDir()
	outF, _ := os.Create(filepath.Join(dir, "stdout"))
	errF, _ := os.Create(filepath.Join(dir, "stderr"))
	oldOut, oldErr := os.Stdout, os.Stderr
	os.Stdout, os.Stderr = outF, errF
	code = run(args)
	os.Stdout, os.Stderr = oldOut, oldErr
	outF.Close()
	errF.Close()
	o, _ := os.ReadFile(outF.Name())
	e, _ := os.ReadFile(errF.Name())
	return code, string(o), string(e)
}

// TestColdstartCreatesItsDatabase starts the function against a database
// that does not exist yet: coldstart creates it, and every start is timed.
func TestColdstartCreatesItsDatabase(t *testing.T) {
	cfg, err := mysql.ParseDSN(testenv.MySQLDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	redisURL := testenv.RedisURL(t)
	cfg.DBName += "_cs" + proc.Nonce()[:6]
	t.Cleanup(func() { dropDatabase(t, cfg) })
	bin, err := proc.Build(context.Background(), t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	jsonOut := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runQuiet(t, "-bin", bin, "-runs", "2", "-idle", "0s", "-json", jsonOut,
		"-mysql-dsn", cfg.FormatDSN(), "-redis-url", redisURL, "-progress", "off")
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var rep Report
	b, err := os.ReadFile(jsonOut)
	if err != nil || json.Unmarshal(b, &rep) != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	if rep.Mode != "mysql+redis" || len(rep.InitializeMs) != 2 || len(rep.RSSIdleBytes) != 2 || rep.BinaryBytes == 0 {
		t.Errorf("report %+v", rep)
	}
	for i, v := range rep.InitializeMs {
		if v <= 0 || v < rep.ListenMs[i] {
			t.Errorf("start %d: listening at %.2f ms, initialized at %.2f ms", i, rep.ListenMs[i], v)
		}
	}
}

// TestColdstartStopsAtAFailedInitialize: a /initialize answered with an
// error is a definite answer, shown with its body, not retried until the
// timeout.
func TestColdstartStopsAtAFailedInitialize(t *testing.T) {
	began := time.Now()
	code, _, stderr := runQuiet(t, "-bin", failingBinary(t), "-runs", "1", "-embedded", "-timeout", "30s", "-progress", "off")
	if code != 1 {
		t.Fatalf("exit %d, want 1; stderr:\n%s", code, stderr)
	}
	for _, want := range []string{"HTTP 404", "initialize_failed", "Unknown database"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not show %q:\n%s", want, stderr)
		}
	}
	if el := time.Since(began); el > 15*time.Second {
		t.Errorf("took %s: the failed /initialize was retried", el)
	}
}

func TestColdstartUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
	}{
		{"help", []string{"-h"}, 0},
		{"bad runs", []string{"-runs", "0"}, 2},
		{"bad progress", []string{"-progress", "sometimes"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if code, _, stderr := runQuiet(t, c.args...); code != c.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, c.code, stderr)
			}
		})
	}
}

// failingBinary is a script that runs this test binary as the stand-in
// whose /initialize fails (coldstart passes the instance a clean
// environment, so the switch is set inside the script).
func failingBinary(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "main")
	body := fmt.Sprintf("#!/bin/sh\nCOLDSTART_HELPER=fail exec %q\n", self)
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func dropDatabase(t *testing.T, cfg *mysql.Config) {
	admin := *cfg
	admin.DBName = ""
	db, err := sql.Open("mysql", admin.FormatDSN())
	if err != nil {
		t.Error(err)
		return
	}
	defer db.Close()
	if _, err := db.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`"); err != nil {
		t.Error(err)
	}
}
