package conf

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Reasons CheckSystem refuses a path, user or address.
var (
	errIsDir        = errors.New("is a directory, not the core's FIFO or a regular file")
	errNotDir       = errors.New("is not a directory")
	errNotFile      = errors.New("is a directory, not a file")
	errChrootNeeds  = errors.New("entering a chroot needs root: start the daemon as root or remove nsca_chroot")
	errUnresolvable = errors.New("does not resolve to an address")
	errNotLocal     = errors.New("is not an address of this machine")
	errNotFree      = errors.New("cannot be listened on")
)

// addressTimeout bounds the look-up of server_address.
const addressTimeout = 10 * time.Second

// Start says how the daemon is about to run, for CheckSystem.
type Start struct {
	// Listen says whether this run mode binds server_address and writes
	// pid_file: every one but inetd's, whose connection is handed over.
	Listen bool
	// Metrics says whether metrics_address must be free: at a start, but
	// not at a reload, whose running daemon holds it itself. A metrics
	// endpoint the operator asked for and does not get would leave the
	// monitoring of the daemon blind, so it refuses the start.
	Metrics bool
}

// CheckSystem refuses, with the file, the line and the fix, what the
// daemon would refuse once it meets this machine, or would start with and
// then silently fail on at every result: a user or group that does not
// exist; a missing nsca_chroot; a server_address that does not resolve; a
// command_file that is a directory; at a start, a metrics_address that
// cannot be listened on (taken by another process); a check_result_path, or a file a
// remote engine reads (a gearman_keyfile, an Icinga 2 certificate) that the
// daemon's user (nsca_user, inside nsca_chroot, as the sinks open them
// after privileges are dropped) cannot use. What stock starts with it only
// warns about: a pid_file that cannot be written (the daemon runs without
// one) and an alternate_dump_file that cannot be (results it would take are
// dropped, each logged). It also warns when a reload will read the
// configuration file as nsca_user and that user cannot read it.
func (c *Config) CheckSystem(s Start) error {
	a, err := c.Account()
	if err != nil {
		return err
	}
	if c.Chroot != "" {
		if st, err := os.Stat(c.Chroot); err != nil {
			return c.PathError("nsca_chroot", fmt.Errorf("%w: create the directory or correct the path", err))
		} else if !st.IsDir() {
			return c.PathError("nsca_chroot", errNotDir)
		}
		if unix.Getuid() != 0 {
			return c.PathError("nsca_chroot", errChrootNeeds)
		}
	}
	if s.Listen && c.PidFile != "" {
		if err := checkPidFile(c.PidFile); err != nil {
			c.warnf(c.Lines["pid_file"], "pid_file=%s: %v; stock nsca logs that it cannot write it and runs "+
				"without a pid file, and so does nsca_fast (scripts that read it then find no pid)", show(c.PidFile), err)
		}
	}
	if s.Listen && c.ServerAddress != "" && os.Getenv("LISTEN_FDS") == "" {
		if err := checkAddress(c.ServerAddress); err != nil {
			return c.PathError("server_address", fmt.Errorf("%w: write an address of this machine, "+
				"a name in /etc/hosts, or leave it empty for every address", err))
		}
	}
	if s.Metrics && c.MetricsAddress != "" {
		ln, err := net.Listen("tcp", c.MetricsAddress)
		if err != nil {
			return c.PathError("metrics_address", fmt.Errorf("%w: %w: stop what serves it or choose another port",
				errNotFree, err))
		}
		ln.Close()
	}
	if err := c.checkPaths(a); err != nil {
		return err
	}
	c.warnReload(a)
	return nil
}

// checkAddress says why the daemon cannot listen on address: it does not
// resolve, or the address it resolves to (the first, as the daemon takes)
// is not one of this machine's.
func checkAddress(address string) error {
	ctx, cancel := context.WithTimeout(context.Background(), addressTimeout)
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", address)
	cancel()
	if err != nil || len(addrs) == 0 {
		return fmt.Errorf("%w (%v)", errUnresolvable, err)
	}
	ip := addrs[0].Unmap()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		return fmt.Errorf("%s %w (%v)", ip, errNotLocal, err)
	}
	ln.Close()
	return nil
}

// checkPaths checks the files and directories the sinks open, as the
// account that opens them and where it sees them (inside nsca_chroot): a
// command_file that is a directory (a FIFO or a file that does not exist
// yet is fine: the core may create it later), a check_result_path that
// does not exist, is no directory or cannot be written (and the same for
// dir_stats), an
// alternate_dump_file that cannot be created or appended to, and key and
// certificate files that cannot be read.
func (c *Config) checkPaths(a Account) error {
	if c.CommandFile != "" {
		st, err := os.Stat(c.inRoot(c.CommandFile))
		if err == nil && st.IsDir() {
			return c.PathError("command_file", errIsDir)
		}
		if err == nil {
			if err := access(c.inRoot(c.CommandFile), a, unix.W_OK); err != nil {
				c.warnf(c.Lines["command_file"], "command_file=%s cannot be written by the daemon's user (%v): "+
					"results will go to the fallbacks, or be dropped, until it can", show(c.CommandFile), err)
			}
		}
	}
	if c.CheckResultPath != "" {
		dir := c.inRoot(c.CheckResultPath)
		if err := usableDir(dir, a); err != nil {
			return c.PathError("check_result_path", withFix(err, a, dir, true))
		}
	}
	if c.DirStats != "" {
		dir := c.inRoot(c.DirStats)
		if err := usableDir(dir, a); err != nil {
			return c.PathError("dir_stats", withFix(err, a, dir, true))
		}
	}
	if c.AlternateDumpFile != "" {
		path := c.inRoot(c.AlternateDumpFile)
		if err := appendable(path, a); err != nil {
			if _, serr := os.Stat(path); serr != nil {
				path = filepath.Dir(path) // the directory is what to fix
			}
			// Stock starts too: the dump file is only the last resort, and
			// each result it then cannot take is logged and counted.
			c.warnf(c.Lines["alternate_dump_file"], "alternate_dump_file=%s: %v; results that the other sinks "+
				"cannot take are dropped (each logged and counted) until it can be written, as stock nsca "+
				"drops them", show(c.AlternateDumpFile), withFix(err, a, path, true))
		}
	}
	var keys []string
	for _, e := range engines {
		if o := e.options(c); o.On() {
			keys = append(keys, o.Files()...)
		}
	}
	for _, name := range keys {
		path := byName[name].Kind.Text(c)
		if path == "" {
			continue
		}
		if err := readable(c.inRoot(path), a); err != nil {
			return c.PathError(name, withFix(err, a, c.inRoot(path), false))
		}
	}
	return nil
}

// withFix adds to the problem err of path what the operator can do about
// it: create what is missing, or give the daemon's user the access it needs
// (write, else read).
func withFix(err error, a Account, path string, write bool) error {
	who := "the daemon's user"
	if a.Set {
		who = "uid " + strconv.Itoa(a.UID)
		if a.User != "" {
			who = a.User
		}
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%w: create it or correct the path", err)
	case errors.Is(err, unix.EROFS):
		return fmt.Errorf("%w: the file system is mounted read-only", err)
	case !errors.Is(err, errDenied) && !errors.Is(err, fs.ErrPermission):
		return err
	case write && groupOf(path) != "":
		// The core's spool belongs to it: the daemon joins its group.
		return fmt.Errorf("%w: let %s write it: set nsca_group=%s, its group (chmod g+w %s if the group "+
			"may not write), or choose a path it can write", err, who, groupOf(path), path)
	case write:
		return fmt.Errorf("%w: let %s write it (chown %s %s) or choose a path it can write", err, who, who, path)
	}
	return fmt.Errorf("%w: let %s read it (chgrp %s %s; chmod g+r %s)", err, who, a.groupName(), path, path)
}

// groupOf is the group of path when it exists and is not root's group.
func groupOf(path string) string {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil || st.Gid == 0 {
		return ""
	}
	return Account{GID: int(st.Gid)}.groupName()
}

// inRoot is where the daemon finds path once inside nsca_chroot, whose "/"
// is also its working directory.
func (c *Config) inRoot(path string) string {
	if c.Chroot == "" {
		return path
	}
	return filepath.Join(c.Chroot, path)
}

// checkPidFile says why the daemon, as the user it starts as, cannot
// create or rewrite path.
func checkPidFile(path string) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errNotFile
		}
		if err := unix.Access(path, unix.W_OK); err != nil {
			return fmt.Errorf("cannot be written: %w", err)
		}
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	switch {
	case err != nil:
		return fmt.Errorf("its directory %s: %w: create it (for /run, with systemd-tmpfiles or RuntimeDirectory=)", dir, errors.Unwrap(err))
	case !st.IsDir():
		return fmt.Errorf("its directory %s %w", dir, errNotDir)
	}
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot be created in %s: %w", dir, err)
	}
	return nil
}

// usableDir says why a cannot create files in dir.
func usableDir(dir string, a Account) error {
	st, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if !st.IsDir() {
		return errNotDir
	}
	if err := access(dir, a, unix.W_OK|unix.X_OK); err != nil {
		return fmt.Errorf("cannot create files in it: %w", err)
	}
	return nil
}

// appendable says why a cannot append to the file at path, creating it if
// it does not exist.
func appendable(path string, a Account) error {
	if st, err := os.Stat(path); err == nil {
		if st.IsDir() {
			return errNotFile
		}
		if err := access(path, a, unix.W_OK); err != nil {
			return fmt.Errorf("cannot be appended to: %w", err)
		}
		return nil
	}
	dir := filepath.Dir(path)
	if err := usableDir(dir, a); err != nil {
		return fmt.Errorf("its directory %s: %w", dir, err)
	}
	return nil
}

// readable says why a cannot read the file at path.
func readable(path string, a Account) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errNotFile
	}
	return access(path, a, unix.R_OK)
}

// errDenied is what access reports for a mode that forbids a.
var errDenied = errors.New("permission denied")

// access says whether a may use path as mode asks (unix.R_OK, W_OK, X_OK).
// As the process itself, access(2) answers, seeing ACLs and read-only file
// systems. For the account the daemon becomes, the permission bits of path
// and of every directory above it decide, with the account's one group (the
// daemon drops its supplementary groups); access(2) still adds what root
// is denied too, a read-only file system.
func access(path string, a Account, mode uint32) error {
	if !a.switches() {
		return unix.Access(path, mode)
	}
	if err := unix.Access(path, mode); err != nil {
		return err
	}
	if a.UID == 0 {
		return nil
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	for dir := filepath.Dir(abs); ; dir = filepath.Dir(dir) {
		if err := permits(dir, a, unix.X_OK); err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if dir == "/" {
			break
		}
	}
	return permits(abs, a, mode)
}

// permits checks path's permission bits for a.
func permits(path string, a Account, mode uint32) error {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return err
	}
	bits := st.Mode & 0o7
	switch {
	case int(st.Uid) == a.UID:
		bits = st.Mode >> 6 & 0o7
	case int(st.Gid) == a.GID:
		bits = st.Mode >> 3 & 0o7
	}
	if bits&mode != mode {
		return fmt.Errorf("%w for uid %d gid %d (owner %d:%d, mode %04o)", errDenied, a.UID, a.GID, st.Uid, st.Gid, st.Mode&0o7777)
	}
	return nil
}

// warnReload warns when every reload will fail: with nsca_workers=0 the
// one process reads the file again on SIGHUP after it became nsca_user (a
// supervisor keeps root for that).
func (c *Config) warnReload(a Account) {
	if c.Workers > 0 || !a.switches() || c.File == EmbeddedFile || c.File == "" {
		return
	}
	if err := access(c.inRoot(c.File), a, unix.R_OK); err != nil {
		who := "nsca_user=" + c.User
		if c.User == "" {
			who = "nsca_group=" + c.Group
		}
		c.warnf(0, "%s cannot read this file (%v), and with nsca_workers=0 a reload (SIGHUP) reads it "+
			"as that user: every reload would fail; make it readable by the daemon's group, not by everyone: %s",
			who, err, c.privateMode(c.File))
	}
}

// privateMode is the fix for a configuration file, holding a password,
// that the wrong users can read: readable by root and the daemon's group
// (which a reload as nsca_user needs), or by root alone when the daemon
// keeps its user.
func (c *Config) privateMode(file string) string {
	a, err := LookupAccount(c.User, c.Group)
	if err != nil || !a.Set {
		return "chmod 0600 " + file
	}
	if g, path, ok := c.sinkGroup(); ok && g != a.groupName() {
		return fmt.Sprintf("chown root:%s %s; chmod 0640 %s, and set nsca_group=%s, the group of %s that the "+
			"daemon writes to (not %s, which other daemons share)", g, file, file, g, path, a.groupName())
	}
	return fmt.Sprintf("chown root:%s %s; chmod 0640 %s", a.groupName(), file, file)
}

// sinkGroup is the group of the first of command_file and check_result_path
// that exists and does not belong to root's group: the group the monitoring
// core lets write its results (nagios, nagcmd), and so the group the daemon
// should run as and share its configuration with. ok is false when there is
// none.
func (c *Config) sinkGroup() (group, path string, ok bool) {
	for _, p := range []string{c.CommandFile, c.CheckResultPath} {
		if g := groupOf(c.inRoot(p)); p != "" && g != "" {
			return g, p, true
		}
	}
	return "", "", false
}
