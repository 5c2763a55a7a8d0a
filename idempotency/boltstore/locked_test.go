package boltstore_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/idempotency/boltstore"
)

// holdEnv makes the test binary a process that holds a store's lock
// (holdTheStore) until its stdin closes, for TestALockedStoreNamesItsHolder.
const holdEnv = "BOLTSTORE_TEST_HOLD_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(holdEnv); dir != "" {
		holdTheStore(dir)
		return
	}
	os.Exit(m.Run())
}

func holdTheStore(dir string) {
	s, err := boltstore.Open(dir, time.Second)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	defer s.Close()
	fmt.Println("holding")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes stdin
}

// A store file another process holds is ErrLocked, naming the file and
// that process, after the wait; nothing is created or changed.
func TestALockedStoreNamesItsHolder(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), holdEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "holding\n" {
		t.Fatalf("the helper says %q", line)
	}
	s, err := boltstore.Open(dir, 50*time.Millisecond)
	if err == nil {
		s.Close()
		t.Fatal("opened a store another process holds")
	}
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	for _, want := range []string{dir, "is held by", "stop that one, or give this command another STATE_DIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %v, want it to say %q", err, want)
		}
	}
	if want := fmt.Sprintf("process %d (", cmd.Process.Pid); holderNamed() && !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to name %q", err, want)
	}
}

// holderNamed: the holder is named where /proc/locks says who holds a lock.
func holderNamed() bool {
	_, err := os.Stat("/proc/locks")
	return err == nil
}
