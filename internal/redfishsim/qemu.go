package redfishsim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"
)

// QEMUConfig configures a QEMU machine.
type QEMUConfig struct {
	// QMP is the path of the VM's QMP socket (QEMU started with
	// -qmp unix:PATH,server=on,wait=off).
	QMP string
	// Command starts the VM (argv; it must open the QMP socket above, and
	// may hold the CPUs with -S: they are started once QMP answers). Without
	// one the VM is someone else's process: it can be reset and stopped,
	// but once gone it cannot be switched on again.
	Command []string
	// BootArgs are the arguments added to Command for a boot (default
	// DefaultBootArgs).
	BootArgs       func(Boot) []string
	Stdout, Stderr io.Writer     // the VM's output (default discarded)
	StartTimeout   time.Duration // for QMP to answer after a start (default 30 s)
	// GracefulTimeout bounds the wait for the guest to power off in a
	// graceful restart (default 5 min); after it the restart is given up.
	GracefulTimeout time.Duration
	// CDDevice is the qdev ID of the CD drive BootArgs attach for a Cd
	// boot ("" none): the BMC's EjectMedia ejects its medium from the
	// running VM (media.go).
	CDDevice string
}

// DefaultBootArgs boots once from the override target: Pxe -boot once=n,
// Hdd once=c, Cd once=d with a file image as -cdrom; nothing for the others
// (an HTTP boot URI or a remote image needs a caller's BootArgs).
func DefaultBootArgs(b Boot) []string {
	switch b.Target {
	case "Pxe":
		return []string{"-boot", "once=n"}
	case "Hdd":
		return []string{"-boot", "once=c"}
	case "Cd":
		args := []string{"-boot", "once=d"}
		if u, err := url.Parse(b.Image); err == nil && u.Scheme == "file" && u.Path != "" {
			args = append(args, "-cdrom", u.Path)
		}
		return args
	}
	return nil
}

// QEMU is a machine that is a QEMU VM, driven through QMP: on is a
// running VM; off is no QEMU process (or a guest that powered off under
// -no-shutdown, or one held by -S before its first start). Power-on
// starts Command with the boot's arguments; ForceOff is quit; a graceful
// shutdown is the ACPI power button (system_powerdown); ForceRestart is
// system_reset, or a new process when the boot override needs other
// arguments; PowerCycle is a new process; Nmi is inject-nmi.
type QEMU struct {
	cfg    QEMUConfig
	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	proc     *exec.Cmd
	exited   chan struct{} // closed when proc has exited
	starting bool          // started, its CPUs not running yet
	gen      int           // bumped by each action: a pending graceful restart yields to a newer one
	boots    []BootRecord
	mediaDir string // virtual media images downloaded (media.go); removed by Close
}

// NewQEMU returns a QEMU machine; Close stops the process it started.
func NewQEMU(cfg QEMUConfig) (*QEMU, error) {
	if cfg.QMP == "" {
		return nil, errors.New("redfishsim: QEMU machine without a QMP socket")
	}
	if cfg.BootArgs == nil {
		cfg.BootArgs = DefaultBootArgs
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 30 * time.Second
	}
	if cfg.GracefulTimeout == 0 {
		cfg.GracefulTimeout = 5 * time.Minute
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &QEMU{cfg: cfg, ctx: ctx, cancel: cancel}, nil
}

// qmp runs f on a fresh QMP connection; gone says the VM's QMP socket is not
// there or not listening (no QEMU process).
func (q *QEMU) qmp(ctx context.Context, f func(*QMP) error) (gone bool, err error) {
	c, err := DialQMP(ctx, "unix", q.cfg.QMP)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, fs.ErrNotExist) {
			return true, err
		}
		return false, err
	}
	defer c.Close()
	return false, f(c)
}

func (q *QEMU) status(ctx context.Context) (status string, gone bool, err error) {
	gone, err = q.qmp(ctx, func(c *QMP) error {
		var err error
		status, err = c.Status(ctx)
		return err
	})
	return status, gone, err
}

// PowerState implements Machine.
func (q *QEMU) PowerState(ctx context.Context) (PowerState, error) {
	q.mu.Lock()
	starting := q.starting
	q.mu.Unlock()
	status, gone, err := q.status(ctx)
	switch {
	case gone && starting:
		return PoweringOn, nil
	case gone:
		return PowerOff, nil
	case err != nil:
		return "", err
	}
	switch status {
	case "running":
		return PowerOn, nil
	case "prelaunch":
		if starting {
			return PoweringOn, nil
		}
		return PowerOff, nil
	case "shutdown":
		return PowerOff, nil
	case "paused", "suspended":
		return Paused, nil
	}
	return PowerOn, nil // migrating, panicked, I/O error…: powered all the same
}

// PowerOn implements Machine.
func (q *QEMU) PowerOn(ctx context.Context, boot Boot) error {
	q.bump()
	return q.powerOn(ctx, boot)
}

func (q *QEMU) powerOn(ctx context.Context, boot Boot) error {
	status, gone, err := q.status(ctx)
	if err != nil && !gone {
		return err
	}
	if !gone {
		var cmds []string
		switch status {
		case "prelaunch", "paused":
			cmds = []string{"cont"}
		case "shutdown":
			cmds = []string{"system_reset", "cont"}
		default:
			return nil
		}
		if _, err := q.qmp(ctx, func(c *QMP) error {
			for _, cmd := range cmds {
				if _, err := c.Execute(ctx, cmd, nil); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
		q.recordBoot(boot)
		return nil
	}
	return q.start(boot)
}

// start starts a new QEMU process; its CPUs are started (cont) once QMP
// answers, by a goroutine of the machine's.
func (q *QEMU) start(boot Boot) error {
	if len(q.cfg.Command) == 0 {
		return errors.New("redfishsim: the VM is not running and there is no command to start it")
	}
	boot, err := q.localImage(boot) // an http(s) CD image as a file
	if err != nil {
		return err
	}
	args := append(slices.Clone(q.cfg.Command[1:]), q.cfg.BootArgs(boot)...)
	cmd := exec.Command(q.cfg.Command[0], args...)
	cmd.Stdout, cmd.Stderr = q.cfg.Stdout, q.cfg.Stderr
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx.Err() != nil {
		return errors.New("redfishsim: QEMU machine closed")
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("redfishsim: start QEMU: %w", err)
	}
	exited := make(chan struct{})
	q.proc, q.exited, q.starting = cmd, exited, true
	q.boots = append(q.boots, BootRecord{At: time.Now(), Boot: boot})
	q.wg.Add(2)
	go func() {
		defer q.wg.Done()
		_ = cmd.Wait()
		close(exited)
		q.mu.Lock()
		if q.proc == cmd {
			q.proc, q.starting = nil, false
		}
		q.mu.Unlock()
	}()
	go func() {
		defer q.wg.Done()
		defer func() {
			q.mu.Lock()
			if q.proc == cmd {
				q.starting = false
			}
			q.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(q.ctx, q.cfg.StartTimeout)
		defer cancel()
		for {
			select {
			case <-exited:
				return
			default:
			}
			if status, _, err := q.status(ctx); err == nil {
				if status == "prelaunch" {
					_, _ = q.qmp(ctx, func(c *QMP) error { _, err := c.Execute(ctx, "cont", nil); return err })
				}
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-exited:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	return nil
}

func (q *QEMU) recordBoot(boot Boot) {
	q.mu.Lock()
	q.boots = append(q.boots, BootRecord{At: time.Now(), Boot: boot})
	q.mu.Unlock()
}

// bump marks a new action, so that a pending graceful restart gives up.
func (q *QEMU) bump() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.gen++
	return q.gen
}

func (q *QEMU) execute(ctx context.Context, command string) error {
	gone, err := q.qmp(ctx, func(c *QMP) error { _, err := c.Execute(ctx, command, nil); return err })
	if gone {
		return fmt.Errorf("redfishsim: %s: the VM is not running", command)
	}
	return err
}

// quit ends the QEMU process and waits until it is gone.
func (q *QEMU) quit(ctx context.Context) error {
	gone, err := q.qmp(ctx, func(c *QMP) error {
		_, err := c.Execute(ctx, "quit", nil)
		if errors.Is(err, io.EOF) {
			return nil // gone before answering
		}
		return err
	})
	if gone {
		return nil
	}
	if err != nil {
		return err
	}
	q.mu.Lock()
	exited := q.exited
	if q.proc == nil {
		exited = nil
	}
	q.mu.Unlock()
	if exited != nil { // ours: wait for it
		select {
		case <-exited:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	for { // someone else's: until its socket stops answering
		if _, gone, _ := q.status(ctx); gone {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PowerOff implements Machine.
func (q *QEMU) PowerOff(ctx context.Context, graceful bool) error {
	q.bump()
	if graceful {
		return q.execute(ctx, "system_powerdown")
	}
	return q.quit(ctx)
}

// Restart implements Machine.
func (q *QEMU) Restart(ctx context.Context, graceful bool, boot Boot) error {
	gen := q.bump()
	if !graceful {
		if len(q.cfg.BootArgs(boot)) > 0 && len(q.cfg.Command) > 0 {
			// The boot device is a command-line matter: a new process.
			if err := q.quit(ctx); err != nil {
				return err
			}
			return q.start(boot)
		}
		if err := q.execute(ctx, "system_reset"); err != nil {
			return err
		}
		q.recordBoot(boot)
		return nil
	}
	if err := q.execute(ctx, "system_powerdown"); err != nil {
		return err
	}
	q.wg.Add(1)
	go func() { // once the guest is off, switch it on, unless another action came
		defer q.wg.Done()
		ctx, cancel := context.WithTimeout(q.ctx, q.cfg.GracefulTimeout)
		defer cancel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
			q.mu.Lock()
			current := q.gen == gen
			q.mu.Unlock()
			if !current {
				return
			}
			if st, err := q.PowerState(ctx); err == nil && st == PowerOff {
				_ = q.powerOn(ctx, boot)
				return
			}
		}
	}()
	return nil
}

// PowerCycle implements Machine: a new process (without a command, a
// system_reset of the one there is).
func (q *QEMU) PowerCycle(ctx context.Context, boot Boot) error {
	q.bump()
	if len(q.cfg.Command) == 0 {
		if err := q.execute(ctx, "system_reset"); err != nil {
			return err
		}
		q.recordBoot(boot)
		return nil
	}
	if err := q.quit(ctx); err != nil {
		return err
	}
	return q.start(boot)
}

// Nmi implements Machine.
func (q *QEMU) Nmi(ctx context.Context) error { return q.execute(ctx, "inject-nmi") }

// Boots returns the boots the machine started, oldest first.
func (q *QEMU) Boots() []BootRecord {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.boots)
}

// PID returns the process ID of the QEMU it started (0 when none runs).
func (q *QEMU) PID() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.proc == nil || q.proc.Process == nil {
		return 0
	}
	return q.proc.Process.Pid
}

// Close stops the machine's goroutines and the QEMU process it started
// (quit, then killed if it does not go within 5 s), and waits for them.
func (q *QEMU) Close() error {
	q.cancel()
	q.mu.Lock()
	proc, exited := q.proc, q.exited
	q.mu.Unlock()
	if proc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = q.qmp(ctx, func(c *QMP) error { _, err := c.Execute(ctx, "quit", nil); return err })
		select {
		case <-exited:
		case <-ctx.Done():
			_ = proc.Process.Kill()
		}
		cancel()
	}
	q.wg.Wait()
	if q.mediaDir != "" {
		_ = os.RemoveAll(q.mediaDir)
	}
	return nil
}

var _ Machine = (*QEMU)(nil)
