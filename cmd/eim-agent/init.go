package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/eimhq/eim/agent"
	"github.com/eimhq/eim/agent/sysinit"
	"github.com/eimhq/eim/bootartifact"
)

// Files of an initramfs built by eim, beside sysinit.ConfigPath.
const (
	initCAFile     = "/etc/eim/ca.crt"
	initArtifactPK = "/etc/eim/artifacts.pub"
	sysroot        = "/sysroot"
	// rootMapping is the device-mapper name of the unlocked encrypted root.
	rootMapping = "eim-root"
)

// pid1 is eim-agent as a machine's first process, in an initramfs built by
// "eim microos build" (micro-OS mode) or "eim testos build" (the test OS:
// node mode). It never returns: when init exits the kernel panics, so
// failures are printed and the work is tried again, and a finished
// micro-OS reboots.
func pid1() {
	var out io.Writer = os.Stderr
	if err := sysinit.MountKernelFS(); err != nil {
		fmt.Fprintln(out, "eim-agent init:", err)
	} else {
		out = sysinit.Consoles()
	}
	log := newLogger(out, false)
	log.Info("EIM agent starting as init", "version", agent.Version, "kernel", sysinit.KernelRelease())
	cfg, err := sysinit.LoadConfig(sysinit.ConfigPath)
	if err != nil {
		halt(log, err)
	}
	sysinit.LoadModules("/lib/modules/"+cfg.KernelRelease, cfg.Modules, log)
	if err := sysinit.MountEFIVars(); err != nil {
		log.Warn("init: no EFI variables; provisioning cannot set the boot order", "err", err)
	}
	sysinit.WaitRandom(log)
	ctx := context.Background()
	for wait := 10 * time.Second; ; wait = min(2*wait, 5*time.Minute) {
		var err error
		switch cfg.Mode {
		case sysinit.ModeMicroOS:
			err = microOS(ctx, log)
		case sysinit.ModeNode:
			err = nodeOS(ctx, cfg, log, out)
		}
		log.Error("init: "+cfg.Mode+" stopped; trying again", "err", err, "retry_in", wait)
		time.Sleep(wait)
	}
}

// halt reports an error nothing can fix at run time and stays up, so the
// message stays on the console.
func halt(log *slog.Logger, err error) {
	log.Error("init: cannot continue; fix the image and boot again", "err", err)
	for {
		time.Sleep(time.Hour)
	}
}

// microOS brings the network up, checks the micro-OS against the server's
// signed manifest and provisions the machine. The workflow's last action
// reboots it; a machine the server says is provisioned already reboots
// too (into its disk, which the firmware tries first).
func microOS(ctx context.Context, log *slog.Logger) error {
	lease, err := network(ctx, log)
	if err != nil {
		return err
	}
	log.Info("network up", "lease", lease.String())
	boot, trust, err := bootConfig("/proc/cmdline", "", "", "")
	if err != nil {
		return err
	}
	// The CA the micro-OS was built with must be the one the boot script
	// pins: a micro-OS of another server is refused rather than trusted.
	caPEM, err := os.ReadFile(initCAFile)
	if err != nil {
		return err
	}
	if fp := pemFingerprint(caPEM); fp != trust {
		return fmt.Errorf("this micro-OS was built for the CA sha256:%s but the boot script pins sha256:%s; rebuild it with \"eim microos build\" on the server", fp, trust)
	}
	client, pin, err := agent.DialPin(boot.URL, string(caPEM))
	if err != nil {
		return err
	}
	pkPEM, err := os.ReadFile(initArtifactPK)
	if err != nil {
		return err
	}
	pub, err := bootartifact.ParsePublicKey(pkPEM)
	if err != nil {
		return err
	}
	m, err := agent.CheckBoot(ctx, client, boot.URL, pub, "/", sysinit.KernelRelease())
	if err != nil {
		return fmt.Errorf("micro-OS check: %w", err)
	}
	log.Info("micro-OS checked against the signed manifest", "key", bootartifact.KeyID(pub), "kernel", m.KernelRelease, "initramfs_files", len(m.InitrdFiles))
	id, err := agent.ReadIdentity("/")
	if err != nil {
		return err
	}
	log.Info("calling home", "url", boot.URL, "uuid", id.UUID, "serial", id.Serial)
	p := &agent.Provisioner{
		Client: client, URL: boot.URL, EnrollToken: boot.EnrollToken, Identity: id,
		Exec:   &agent.Machine{SysRoot: "/"},
		Logger: log, Backoff: agent.DefaultBackoff, Pin: pin,
	}
	res, err := p.Run(ctx)
	if err != nil {
		return err
	}
	log.Info("host is provisioned; booting it from its disk", "host", res.HostID)
	return sysinit.Reboot(log)
}

// nodeOS is the test OS: mount the installed system's file system, apply
// the first-boot seed provisioning wrote, bring the network up and run the
// agent in node mode with the configuration provisioning wrote.
func nodeOS(ctx context.Context, cfg sysinit.Config, log *slog.Logger, out io.Writer) error {
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	dev, err := sysinit.FindByLabel(fctx, cfg.RootLabel)
	cancel()
	if err != nil {
		return err
	}
	if _, err := os.Stat(sysroot + "/etc"); err != nil {
		if agent.IsLUKS2(dev) {
			// The encrypted root (full-disk encryption): its key is sealed
			// to the TPM. When it does not unseal, the error says why on
			// the console; the agent's credentials are inside, so nothing
			// else can be reported.
			start := time.Now()
			mapped, err := agent.UnlockRoot(dev, rootMapping)
			if err != nil {
				return err
			}
			log.Info("unlocked the encrypted root with the TPM", "device", dev, "mapping", mapped, "took", time.Since(start).Round(time.Millisecond))
			dev = mapped
		}
		fstype, err := sysinit.Mount(dev, sysroot, 0)
		if err != nil {
			return err
		}
		log.Info("mounted the installed system", "device", dev, "type", fstype)
	}
	if _, err := sysinit.FirstBoot(sysroot, log); err != nil {
		return err
	}
	lease, err := network(ctx, log)
	if err != nil {
		return err
	}
	log.Info("network up", "lease", lease.String())
	return Main(ctx, []string{"node",
		"--config", sysroot + "/etc/eim/agent.json",
		"--state-dir", sysroot + "/var/lib/eim-agent",
		"--telemetry-file", sysroot + "/etc/eim/telemetry.json",
	}, out, out)
}

func network(ctx context.Context, log *slog.Logger) (*sysinit.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return sysinit.Network(ctx, log)
}

// pemFingerprint is the hex SHA-256 of the first certificate's DER.
func pemFingerprint(b []byte) string {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return ""
	}
	sum := sha256.Sum256(blk.Bytes)
	return hex.EncodeToString(sum[:])
}
