//go:build !linux

package luks2

import "errors"

var errNoDM = errors.New("luks2: activating a volume needs Linux's device-mapper")

// Activate needs Linux's device-mapper.
func Activate(name, devPath string, volumeKey []byte) (string, error) { return "", errNoDM }

// Deactivate needs Linux's device-mapper.
func Deactivate(name string) error { return errNoDM }
