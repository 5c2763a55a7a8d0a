// Command perfspin is TestProfiler's profiled process: for each line on
// stdin it burns CPU for 300 ms in spinRecorded, then in spinUnrecorded, by
// turns, and answers "done" each time.
package main

import (
	"bufio"
	"fmt"
	"os"
	"time"
)

func main() {
	in := bufio.NewScanner(os.Stdin)
	for i := 0; in.Scan(); i++ {
		if i%2 == 0 {
			spinRecorded(300 * time.Millisecond)
		} else {
			spinUnrecorded(300 * time.Millisecond)
		}
		fmt.Println("done")
	}
}

// spinRecorded and spinUnrecorded burn CPU in their own frames (the
// samples' leaf is theirs).
//
//go:noinline
func spinRecorded(d time.Duration) (s int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 10000 {
			s += i * i % 7
		}
	}
	return s
}

//go:noinline
func spinUnrecorded(d time.Duration) (s int) {
	for end := time.Now().Add(d); time.Now().Before(end); {
		for i := range 10000 {
			s += i * i % 5
		}
	}
	return s
}
