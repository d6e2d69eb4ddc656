package proc

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// listenFDsStart is the first descriptor systemd passes (SD_LISTEN_FDS_START).
const listenFDsStart = 3

// ActivatedListeners returns the sockets systemd's socket activation (or
// systemd-socket-activate) passed to this process, and clears the
// variables so that child processes do not take them for their own.
func ActivatedListeners() []int {
	defer os.Unsetenv("LISTEN_PID")
	defer os.Unsetenv("LISTEN_FDS")
	defer os.Unsetenv("LISTEN_FDNAMES")
	pid, err := strconv.Atoi(os.Getenv("LISTEN_PID"))
	if err != nil || pid != os.Getpid() {
		return nil
	}
	n, err := strconv.Atoi(os.Getenv("LISTEN_FDS"))
	if err != nil || n <= 0 {
		return nil
	}
	fds := make([]int, n)
	for i := range fds {
		fds[i] = listenFDsStart + i
		unix.CloseOnExec(fds[i])
	}
	return fds
}

// Notify sends state to systemd's notification socket (sd_notify), if the
// service manager gave one; without it, Notify does nothing.
func Notify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("proc: sd_notify: %w", err)
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}

// Reloading is the sd_notify message for the start of a reload, with the
// monotonic timestamp Type=notify-reload units require.
func Reloading() string {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return fmt.Sprintf("RELOADING=1\nMONOTONIC_USEC=%d", ts.Nano()/int64(time.Microsecond))
}
