//go:build !linux

package agent

func clearImmutable(string) {}
