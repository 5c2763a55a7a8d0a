package boltstore

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// holderOf names the process that holds path's file lock, from
// /proc/locks (bbolt takes an flock), as "process 1234 (main serve)": its
// id, and its program and first argument only, which hold no secret.
// Unknown: "another process".
func holderOf(path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		return "another process"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "another process"
	}
	f, err := os.Open("/proc/locks")
	if err != nil {
		return "another process"
	}
	defer f.Close()
	// The file as /proc/locks names it: major:minor (hex) of its device, and its inode.
	dev := uint64(st.Dev) // a uint32 on some architectures
	major, minor := (dev>>8)&0xfff|(dev>>32)&^uint64(0xfff), dev&0xff|(dev>>12)&^uint64(0xff)
	file := fmt.Sprintf("%02x:%02x:%d", major, minor, st.Ino)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 fe:00:5678 0 EOF"; a waiter's line has "->" after the id.
		fields := strings.Fields(strings.Replace(sc.Text(), "->", "", 1))
		if len(fields) < 6 || fields[1] != "FLOCK" || fields[5] != file {
			continue
		}
		pid, err := strconv.Atoi(fields[4])
		if err != nil || pid == os.Getpid() {
			continue
		}
		return fmt.Sprintf("process %d%s", pid, program(pid))
	}
	return "another process"
}

// program is " (name arg)" of pid's command line, or "".
func program(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if err != nil || len(args) == 0 || len(args[0]) == 0 {
		return ""
	}
	name := filepath.Base(string(args[0]))
	if len(args) > 1 {
		name += " " + string(args[1])
	}
	return " (" + name + ")"
}
