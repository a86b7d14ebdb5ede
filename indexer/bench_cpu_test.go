package indexer_test

import (
	"bytes"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cpuClock reads the CPU time spent so far by this process (the node, the
// indexer and the database client) and by the PostgreSQL server at
// TEST_DATABASE_URL, so that a benchmark can report where the CPU went.
// The server's figure comes from /proc: its postmaster, the children it
// has reaped and the live ones; it is 0 where that cannot be read
// (another machine, not Linux, no permission).
type cpuClock struct{ proc, server time.Duration }

func readCPU() cpuClock {
	var ru syscall.Rusage
	var c cpuClock
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		c.proc = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if pid := postmasterPID(); pid > 0 {
		c.server = serverCPU(pid)
	}
	return c
}

var (
	pmOnce sync.Once
	pmPID  int
)

// postmasterPID is the PostgreSQL server's process id, read from
// postmaster.pid in its data directory.
func postmasterPID() int {
	pmOnce.Do(func() {
		u := os.Getenv("TEST_DATABASE_URL")
		if u == "" {
			return
		}
		db, err := sql.Open("postgres", u)
		if err != nil {
			return
		}
		defer db.Close()
		var dir string
		if db.QueryRow("SHOW data_directory").Scan(&dir) != nil {
			return
		}
		b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
		if err != nil {
			return
		}
		line, _, _ := strings.Cut(string(b), "\n")
		pmPID, _ = strconv.Atoi(strings.TrimSpace(line))
	})
	return pmPID
}

// serverCPU sums the CPU time of process pid (with its reaped children)
// and of its live children.
func serverCPU(pid int) time.Duration {
	const tick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	total := time.Duration(0)
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(p)
		if len(f) < 15 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		switch {
		case p == pid:
			for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
				n, _ := strconv.ParseInt(f[i], 10, 64)
				total += time.Duration(n) * tick
			}
		case ppid == pid:
			for _, i := range []int{11, 12} {
				n, _ := strconv.ParseInt(f[i], 10, 64)
				total += time.Duration(n) * tick
			}
		}
	}
	return total
}

// procStat returns the fields of /proc/pid/stat after the command name
// (state first).
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}
