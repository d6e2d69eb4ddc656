package conf

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"

	"golang.org/x/sys/unix"
)

// Reasons nsca_user or nsca_group cannot be used, wrapped by LookupAccount
// and Config.Account.
var (
	// ErrNoUser: nsca_user names no user of this machine.
	ErrNoUser = errors.New("no such user")
	// ErrNoGroup: nsca_group names no group of this machine.
	ErrNoGroup = errors.New("no such group")
)

// Account is the user and group the daemon runs as once it has bound its
// port: nsca_user and nsca_group resolved, or the starting process's own.
type Account struct {
	User, Group string // as configured; "" when not set
	UID, GID    int
	// Set says whether nsca_user or nsca_group asked for a change at all.
	Set bool
}

// LookupAccount resolves nsca_user and nsca_group, given as names or
// numeric ids, before any chroot hides /etc/passwd. An empty user or group
// keeps the current one; a user without a group takes the user's primary
// group. A name that does not exist is an error (ErrNoUser, ErrNoGroup), so
// a typo refuses to start instead of running as root.
func LookupAccount(userName, groupName string) (Account, error) {
	a := Account{User: userName, Group: groupName, UID: unix.Getuid(), GID: unix.Getgid()}
	if userName != "" {
		a.Set = true
		if n, err := strconv.Atoi(userName); err == nil {
			a.UID = n
		} else {
			u, err := user.Lookup(userName)
			if err != nil {
				return a, fmt.Errorf("nsca_user=%s: %w", userName, ErrNoUser)
			}
			a.UID, _ = strconv.Atoi(u.Uid)
			if groupName == "" {
				a.GID, _ = strconv.Atoi(u.Gid)
			}
		}
	}
	if groupName != "" {
		a.Set = true
		if n, err := strconv.Atoi(groupName); err == nil {
			a.GID = n
		} else {
			g, err := user.LookupGroup(groupName)
			if err != nil {
				return a, fmt.Errorf("nsca_group=%s: %w", groupName, ErrNoGroup)
			}
			a.GID, _ = strconv.Atoi(g.Gid)
		}
	}
	return a, nil
}

// Account resolves nsca_user and nsca_group as LookupAccount does; an error
// names the file, the line and what to do.
func (c *Config) Account() (Account, error) {
	a, err := LookupAccount(c.User, c.Group)
	switch {
	case errors.Is(err, ErrNoUser):
		return a, c.PathError("nsca_user", fmt.Errorf("%w: create it (adduser --system %s) or name an existing user", ErrNoUser, c.User))
	case errors.Is(err, ErrNoGroup):
		return a, c.PathError("nsca_group", fmt.Errorf("%w: create it (addgroup --system %s) or name an existing group", ErrNoGroup, c.Group))
	}
	return a, err
}

// switches says whether the daemon becomes a in fact: only a process
// started as root can change its user; any other stays as it is (and says
// so), as stock does.
func (a Account) switches() bool { return a.Set && unix.Getuid() == 0 }

// groupName is the account's group as an operator would write it in chown.
func (a Account) groupName() string {
	if g, err := user.LookupGroupId(strconv.Itoa(a.GID)); err == nil {
		return g.Name
	}
	return strconv.Itoa(a.GID)
}
