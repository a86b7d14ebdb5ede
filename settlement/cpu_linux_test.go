package settlement

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat.
const userHZ = 100

// processCPU is the user and system CPU time this process used so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// ticks is the user and system CPU time of the processes pids so far, in
// 1/userHZ s, from /proc/<pid>/stat (a process whose file cannot be read
// counts 0).
func ticks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		sum += procTicks(pid)
	}
	return sum
}

func procTicks(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count the fields after
	// its closing parenthesis; utime and stime are fields 14 and 15.
	fields := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return utime + stime
}
