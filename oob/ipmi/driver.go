package ipmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultTimeout bounds one ipmitool run when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// Driver runs ipmitool for any number of BMCs and serialises the calls made
// to each BMC address, whichever *BMC makes them.
type Driver struct {
	ipmitool string

	mu    sync.Mutex
	locks map[string]*addrLock
}

type addrLock struct {
	ch   chan struct{} // a one-slot semaphore, so waiting obeys the context
	refs int
}

// NewDriver returns a driver running the ipmitool binary at path ("" finds
// "ipmitool" on PATH).
func NewDriver(path string) *Driver {
	if path == "" {
		path = "ipmitool"
	}
	return &Driver{ipmitool: path, locks: map[string]*addrLock{}}
}

// Config addresses one BMC.
type Config struct {
	Host     string
	Port     int // UDP; 0 means 623
	Username string
	Password string
	// Timeout bounds each command, session set-up included (0:
	// DefaultTimeout). A BMC that has not answered by then is Unreachable.
	Timeout time.Duration
}

// BMC is one BMC reached over IPMI lanplus with cipher suite 3
// (RAKP-HMAC-SHA1, HMAC-SHA1-96, AES-CBC-128), the suite every IPMI 2.0 BMC
// must offer.
type BMC struct {
	d    *Driver
	cfg  Config
	addr string
}

// BMC returns the BMC that cfg addresses, after checking cfg.
func (d *Driver) BMC(cfg Config) (*BMC, error) {
	if cfg.Host == "" {
		return nil, errors.New("ipmi: host is empty")
	}
	if strings.HasPrefix(cfg.Host, "-") || strings.ContainsAny(cfg.Host, " \t\n") {
		return nil, fmt.Errorf("ipmi: host %q is not a host name or address", cfg.Host)
	}
	if cfg.Port == 0 {
		cfg.Port = 623
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("ipmi: port %d out of range", cfg.Port)
	}
	if cfg.Username == "" || strings.HasPrefix(cfg.Username, "-") {
		return nil, errors.New("ipmi: username is empty or starts with '-'")
	}
	// ipmitool takes at most 20 bytes (IPMI 2.0's longest password).
	if len(cfg.Password) > 20 {
		return nil, errors.New("ipmi: password longer than 20 bytes")
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &BMC{d: d, cfg: cfg, addr: net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))}, nil
}

// Addr is the BMC's host:port.
func (b *BMC) Addr() string { return b.addr }

// PowerState reads the chassis power state.
func (b *BMC) PowerState(ctx context.Context) (PowerState, error) {
	const op = "power status"
	out, err := b.run(ctx, op, "power", "status")
	if err != nil {
		return Off, err
	}
	s, ok := parsePowerStatus(out)
	if !ok {
		return Off, &Error{Kind: Failed, Op: op, Addr: b.addr, Detail: "unexpected answer " + strconv.Quote(firstLine(out))}
	}
	return s, nil
}

// Power sends a chassis power control. The BMC acknowledges it before the
// machine has changed state: read PowerState to confirm.
func (b *BMC) Power(ctx context.Context, a Action) error {
	if !a.valid() {
		return fmt.Errorf("ipmi: unknown power action %q", a)
	}
	_, err := b.run(ctx, "power "+string(a), "power", string(a))
	return err
}

// SetBootDevice sets the boot override: for the next boot only when once,
// else for all boots; an EFI boot when uefi.
func (b *BMC) SetBootDevice(ctx context.Context, dev BootDevice, once, uefi bool) error {
	if !dev.settable() {
		return fmt.Errorf("ipmi: unknown boot device %q", dev)
	}
	args := []string{"chassis", "bootdev", string(dev)}
	var opts []string
	if !once {
		opts = append(opts, "persistent")
	}
	if uefi {
		opts = append(opts, "efiboot")
	}
	if len(opts) > 0 {
		args = append(args, "options="+strings.Join(opts, ","))
	}
	_, err := b.run(ctx, "bootdev "+string(dev), args...)
	return err
}

// BootDevice reads the boot override back (boot parameter 5).
func (b *BMC) BootDevice(ctx context.Context) (Boot, error) {
	const op = "bootparam get 5"
	out, err := b.run(ctx, op, "chassis", "bootparam", "get", "5")
	if err != nil {
		return Boot{}, err
	}
	boot, err := parseBootFlags(out)
	if err != nil {
		return Boot{}, &Error{Kind: Failed, Op: op, Addr: b.addr, Detail: err.Error()}
	}
	return boot, nil
}

// lock takes the address's semaphore, or gives up when ctx ends.
func (d *Driver) lock(ctx context.Context, addr string) (unlock func(), err error) {
	d.mu.Lock()
	l := d.locks[addr]
	if l == nil {
		l = &addrLock{ch: make(chan struct{}, 1)}
		d.locks[addr] = l
	}
	l.refs++
	d.mu.Unlock()
	release := func() {
		d.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(d.locks, addr)
		}
		d.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// run runs one ipmitool command against the BMC, with the address's lock
// held, and returns its standard output.
func (b *BMC) run(ctx context.Context, op string, args ...string) (string, error) {
	fail := func(k Kind, detail string, cause error) error {
		return &Error{Kind: k, Op: op, Addr: b.addr, Detail: b.redact(detail), cause: cause}
	}
	unlock, err := b.d.lock(ctx, b.addr)
	if err != nil {
		// Not an answer from the BMC: the caller gave up while another
		// command to it ran.
		return "", fail(Failed, "waiting for an earlier command to this BMC: "+err.Error(), err)
	}
	defer unlock()

	ctx, cancel := context.WithTimeout(ctx, b.cfg.Timeout)
	defer cancel()
	argv := []string{
		"-I", "lanplus", "-C", "3",
		"-H", b.cfg.Host, "-p", strconv.Itoa(b.cfg.Port),
		"-U", b.cfg.Username,
		"-E", // the password from IPMI_PASSWORD, out of ps's sight
		"-v", // the session's error lines tell a wrong password from silence
	}
	cmd := exec.CommandContext(ctx, b.d.ipmitool, append(argv, args...)...)
	cmd.Env = []string{"IPMI_PASSWORD=" + b.cfg.Password, "LC_ALL=C"}
	cmd.WaitDelay = time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		return stdout.String(), nil
	}
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return "", fail(Unreachable, fmt.Sprintf("no answer within %s", b.cfg.Timeout), err)
		}
		// The caller cancelled: nothing is known of the BMC.
		return "", fail(Failed, "cancelled", err)
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		// Not started: ipmitool missing or not executable.
		return "", fail(Failed, "running ipmitool: "+err.Error(), err)
	}
	k, detail := classify(stderr.String())
	return "", fail(k, detail, nil)
}

// redact removes the password from text that ipmitool produced, should a
// version ever echo it.
func (b *BMC) redact(s string) string {
	if b.cfg.Password == "" {
		return s
	}
	return strings.ReplaceAll(s, b.cfg.Password, "********")
}
