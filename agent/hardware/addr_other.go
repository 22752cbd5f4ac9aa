//go:build !linux

package hardware

import "errors"

// dynamicAddrs reads Linux's netlink; elsewhere every method is unknown.
func dynamicAddrs() (map[addrKey]bool, error) {
	return nil, errors.New("address lifetimes: not supported on this system")
}
