package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/idemgate/idemgate/deploy"
	"github.com/idemgate/idemgate/internal/dev/proc"
)

// fleet is what the load test runs against: the function's instances (with
// Redis, and without for the dup-mysql phase), the raw function's and the
// bare handler's processes, or the running instances given by -targets.
type fleet struct {
	targets, mysqlTargets, bareTargets, rawTargets []string
	loadPIDs, mysqlPIDs, barePIDs, rawPIDs         []int
	pidOf                                          map[int]string // pid → label in the report
	stateDir                                       string         // the spawned instances' STATE_DIR (results go to the fake OSS)
	env                                            []string       // the instances' environment, less Redis
	insts, bares, raws                             []*proc.Instance
	logPaths                                       []string // of the stopped instances
}

// spawnFunction builds (unless o.Bin), migrates and starts o.Spawn instances
// with Redis, and as many without when the dup-mysql or the first-delivery
// phases run; env points them at the fake services.
func (f *fleet) spawnFunction(ctx context.Context, o Options, work string, fakeEnv []string, logf func(string, ...any)) error {
	bin := o.Bin
	if bin == "" {
		var err error
		if o.PerfDir != "" { // the same code, with the symbols perf names it by
			logf("building the function (CGO_ENABLED=0 -trimpath, symbols kept for -perf-dir) …")
			bin, err = proc.BuildProfiled(ctx, ".", filepath.Join(work, "main"))
		} else {
			logf("building the function (CGO_ENABLED=0 -trimpath -ldflags='-s -w') …")
			bin, err = proc.Build(ctx, work, true)
		}
		if err != nil {
			return err
		}
	}
	f.stateDir = filepath.Join(work, "state")
	// FC_FUNCTION_MEMORY_SIZE as FC sets it from the deployed memorySize: serve
	// sizes its GC from it (internal/gctune).
	env := append([]string{"MYSQL_DSN=" + o.MySQLDSN, "STATE_DIR=" + f.stateDir,
		"FC_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(deploy.Idemgate().Function.MemoryMB)}, fakeEnv...)
	f.env = env
	if _, err := proc.CLI(ctx, bin, env, "migrate"); err != nil {
		return err
	}
	type instanceSet struct {
		name        string
		redis, load bool // load: the targets of the main phase
	}
	sets := []instanceSet{{"redis", true, true}}
	if !o.Redis {
		sets[0] = instanceSet{"mysql-only", false, true}
	} else if o.DupN > 0 || o.FirstN > 0 {
		sets = append(sets, instanceSet{"mysql-only", false, false})
	}
	f.pidOf = map[int]string{}
	for _, set := range sets {
		e := slices.Clone(env)
		if set.redis {
			e = append(e, "REDIS_URL="+o.RedisURL, "REDIS_KEY_PREFIX="+o.RedisKeyPrefix)
		}
		for i := range o.Spawn {
			in, err := proc.Start(ctx, bin, proc.Options{Env: e, LogPath: filepath.Join(work, fmt.Sprintf("instance-%s-%d.log", set.name, i)),
				Wrap: o.InstanceWrap, Host: o.InstanceHost})
			if err != nil {
				return err
			}
			f.insts = append(f.insts, in)
			f.pidOf[in.Pid()] = fmt.Sprintf("%s#%d (pid %d)", set.name, i, in.Pid())
			if set.load {
				f.targets, f.loadPIDs = append(f.targets, in.Base), append(f.loadPIDs, in.Pid())
			} else {
				f.mysqlTargets, f.mysqlPIDs = append(f.mysqlTargets, in.Base), append(f.mysqlPIDs, in.Pid())
			}
		}
	}
	logf("spawned %d instances (%s)", len(f.insts), strings.Join(append(slices.Clone(f.targets), f.mysqlTargets...), " "))
	return nil
}

// idleRSS is the RSS of every spawned instance, by label.
func (f *fleet) idleRSS() map[string]int64 {
	m := map[string]int64{}
	for _, in := range f.insts {
		if n, err := proc.RSS(in.Pid()); err == nil {
			m[f.pidOf[in.Pid()]] = n
		}
	}
	return m
}

// spawnBare starts the bare handler as the function runs: as many processes
// as there are targets, built with the same flags, hit round robin.
func (f *fleet) spawnBare(ctx context.Context, bareBin, redisURL, prefix, work string) error {
	for i := range max(1, len(f.targets)) {
		in, err := proc.Start(ctx, bareBin, proc.Options{Env: []string{"REDIS_URL=" + redisURL, "REDIS_KEY_PREFIX=" + prefix},
			LogPath: filepath.Join(work, fmt.Sprintf("bareserver-%d.log", i))})
		if err != nil {
			return fmt.Errorf("bareserver: %w", err)
		}
		f.bares = append(f.bares, in)
		f.bareTargets, f.barePIDs = append(f.bareTargets, in.Base), append(f.barePIDs, in.Pid())
	}
	return nil
}

// RawSkipEnv, set in the load test's environment, is passed to the raw
// function (scripts/loadtest/rawfn), which then skips that step: only for
// the test that proves checkRawFunction catches it.
const RawSkipEnv = "IDEMGATE_RAWFN_SKIP"

// spawnRaw starts the raw function as the instances run: as many processes
// as there are instances with Redis, placed and configured as they are (no
// Redis: the floor has none).
func (f *fleet) spawnRaw(ctx context.Context, rawBin string, o Options, work string) error {
	env := slices.Clone(f.env)
	if v := os.Getenv(RawSkipEnv); v != "" {
		env = append(env, RawSkipEnv+"="+v)
	}
	for i := range max(1, len(f.targets)) {
		in, err := proc.Start(ctx, rawBin, proc.Options{Env: env, LogPath: filepath.Join(work, fmt.Sprintf("rawfn-%d.log", i)),
			Wrap: o.InstanceWrap, Host: o.InstanceHost})
		if err != nil {
			return fmt.Errorf("raw function: %w", err)
		}
		f.raws = append(f.raws, in)
		f.pidOf[in.Pid()] = fmt.Sprintf("raw-function#%d (pid %d)", i, in.Pid())
		f.rawTargets, f.rawPIDs = append(f.rawTargets, in.Base), append(f.rawPIDs, in.Pid())
	}
	return nil
}

// stopFunction stops the function's instances (they flush their counters on
// SIGTERM) and keeps their log paths.
func (f *fleet) stopFunction() {
	for _, in := range f.insts {
		in.Stop()
		f.logPaths = append(f.logPaths, in.LogPath)
	}
	f.insts = nil
}

// stop ends every process still running.
func (f *fleet) stop() {
	for _, in := range slices.Concat(f.bares, f.raws) {
		in.Stop()
	}
	f.bares, f.raws = nil, nil
	f.stopFunction()
}

// RSSSampler records the largest RSS of a set of processes every 50 ms
// between Start and Stop.
type RSSSampler struct {
	mu   sync.Mutex
	max  map[int]int64
	stop chan struct{}
	done chan struct{}
}

// Start samples pids until Stop.
func (s *RSSSampler) Start(pids []int) {
	s.max = map[int]int64{}
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			for _, p := range pids {
				if n, err := proc.RSS(p); err == nil {
					s.mu.Lock()
					s.max[p] = max(s.max[p], n)
					s.mu.Unlock()
				}
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
}

// Stop ends sampling and returns the largest RSS seen of each pid.
func (s *RSSSampler) Stop() map[int]int64 {
	if s.stop == nil {
		return nil
	}
	close(s.stop)
	<-s.done
	s.stop = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max
}
