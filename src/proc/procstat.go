package proc

import (
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"nsca_fast/stages/counters"
)

// processStart is when this process started, for process_start_time_seconds.
var processStart = time.Now()

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procStat reads the fields of /proc/PID/stat (self for pid 0) after the
// command name, numbered as proc(5) numbers them from 3 on.
func procStat(pid int) []string {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	// Read with plain system calls: os.ReadFile's file joins Go's poller
	// (a failing epoll_ctl, four fcntl and an fstat), which for the
	// supervisor's step every 200 ms was most of the system calls an
	// idle daemon made.
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	var buf [1024]byte // a stat line is about 300 bytes
	n, err := unix.Read(fd, buf[:])
	unix.Close(fd)
	if err != nil || n <= 0 {
		return nil
	}
	b := buf[:n]
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// statField is field n (proc(5)'s numbering) of fields, as a number.
func statField(fields []string, n int) float64 {
	if n-3 >= len(fields) {
		return 0
	}
	v, _ := strconv.ParseFloat(fields[n-3], 64)
	return v
}

// statCPU is the user and system CPU time in fields, a /proc/PID/stat
// line's (procStat), in seconds.
func statCPU(fields []string) float64 {
	return (statField(fields, 14) + statField(fields, 15)) / clockTicks
}

// openFDs counts the descriptors pid (self for 0) has open.
func openFDs(pid int) int64 {
	path := "/proc/self/fd"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/fd"
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return 0
	}
	return int64(len(entries))
}

// processStats sums the process metrics of this process and the running
// workers. This process's children's CPU (cutime, cstime: workers that
// exited and were waited for) counts too, so the sum does not fall when a
// worker is replaced.
func processStats(workers func() []int) counters.ProcessStats {
	page := float64(unix.Getpagesize())
	self := procStat(0)
	p := counters.ProcessStats{
		CPUSeconds:    statCPU(self) + (statField(self, 16)+statField(self, 17))/clockTicks,
		ResidentBytes: int64(statField(self, 24) * page),
		VirtualBytes:  int64(statField(self, 23)),
		OpenFDs:       openFDs(0),
		StartTimeUnix: float64(processStart.UnixNano()) / 1e9,
		Processes:     1,
	}
	if workers == nil {
		return p
	}
	for _, pid := range workers() {
		f := procStat(pid)
		if f == nil {
			continue
		}
		p.CPUSeconds += statCPU(f)
		p.ResidentBytes += int64(statField(f, 24) * page)
		p.VirtualBytes += int64(statField(f, 23))
		p.OpenFDs += openFDs(pid)
		p.Processes++
	}
	return p
}
