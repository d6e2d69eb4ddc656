package proc

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"

	"nsca_fast/conf"
)

// ErrPrivileges wraps failures to find or become the configured identity.
var ErrPrivileges = errors.New("proc: privileges")

// Identity is the user and group the daemon runs as after start-up.
type Identity = conf.Account

// ResolveIdentity looks up nsca_user and nsca_group (see
// conf.LookupAccount) before any chroot hides /etc/passwd.
func ResolveIdentity(userName, groupName string) (*Identity, error) {
	a, err := conf.LookupAccount(userName, groupName)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPrivileges, err)
	}
	return &a, nil
}

// Drop enters chroot (if not empty) and then becomes id, in stock's order:
// the caller has bound its sockets already. Paths used afterwards resolve
// inside the chroot. Go applies setuid and setgid to every thread. A process
// that is not root (inetd running it as nagios) cannot change identity; like
// stock it then carries on as it is, and Drop says so in warning.
func Drop(chroot string, id *Identity) (warning string, err error) {
	if chroot != "" {
		if err := unix.Chroot(chroot); err != nil {
			return "", fmt.Errorf("%w: nsca_chroot=%s: %w", ErrPrivileges, chroot, err)
		}
		if err := unix.Chdir("/"); err != nil {
			return "", fmt.Errorf("%w: chdir / in chroot: %w", ErrPrivileges, err)
		}
	}
	if id == nil || !id.Set {
		return "", nil
	}
	uid, gid := unix.Getuid(), unix.Getgid()
	if uid != 0 {
		if uid != id.UID || gid != id.GID {
			return fmt.Sprintf("proc: not root: staying uid %d gid %d instead of nsca_user=%s nsca_group=%s", uid, gid, id.User, id.Group), nil
		}
		return "", nil
	}
	if err := syscall.Setgroups([]int{id.GID}); err != nil {
		return "", fmt.Errorf("%w: setgroups: %w", ErrPrivileges, err)
	}
	if err := syscall.Setgid(id.GID); err != nil {
		return "", fmt.Errorf("%w: nsca_group=%s (gid %d): %w", ErrPrivileges, id.Group, id.GID, err)
	}
	if err := syscall.Setuid(id.UID); err != nil {
		return "", fmt.Errorf("%w: nsca_user=%s (uid %d): %w", ErrPrivileges, id.User, id.UID, err)
	}
	return "", nil
}
