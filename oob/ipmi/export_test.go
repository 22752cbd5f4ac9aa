package ipmi

import "context"

// RunForTest runs any ipmitool command against b, for commands the typed
// interface refuses to send.
func RunForTest(ctx context.Context, b *BMC, args ...string) error {
	_, err := b.run(ctx, args[0]+" "+args[1], args...)
	return err
}
